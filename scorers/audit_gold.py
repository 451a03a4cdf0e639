"""Gold arguments an agent is never shown (the audit's `unseen_gold` check, docs/audit.md).

gorilla issue #1367's defect: BFCL's gold trajectory posts a tweet whose text no call returns
and no user turn says, so every agent fails, however capable. An oracle replaying the gold
passes such a task by construction, so its pass says nothing; what shows the defect is where
the gold's text comes from. For each call the oracle made, every string argument the task's
expectations fix (an `exact` or `subset` matcher; for a suite imported from BFCL, every
argument of the ground truth) is looked for in what the agent could have read before the call:
the task's instruction, the user turns handed out so far, the tools as listed (names,
descriptions, schemas with their enums) and the results of the calls before it. A value found
in none of them is one the agent would have to guess.

For BFCL, whose checker compares states and results rather than arguments, a value counts only
where the task's expected results or state predicates hold it.

Which values: where the expectations are the whole trajectory (`allow_extra = false`: the
agent may make no other call), every fixed string. Where other calls are allowed (BFCL's
checker allows them too), an agent may learn a name or an id from a call the gold leaves out
(an `ls` before the `cat`, a user lookup before the message), which the oracle, making only
the gold calls, never shows; there only free text is checked (FREE_TEXT_WORDS words or more: a
tweet, a message, a title), text no lookup returns and an agent has to compose, word for word.

Matching is deliberately forgiving, so that a flag means "nowhere": case and runs of whitespace
are ignored, the value may sit inside a longer text (on word boundaries), and leading or
trailing `#`, `@`, `/`, quotes and punctuation are dropped (a tag `#x` derives from "tag x").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from tracecard.traces import semconv as sc

from .calls import agent_calls
from .suite import Task
from .types import Span

__all__ = ["FREE_TEXT_WORDS", "unseen_gold_arguments"]

_FIXED = ("exact", "subset")  # matchers whose value an agent must reproduce
_EDGES = " \t\n#@/'\"`.,;:!?()[]{}"
_SHOWN_MAX = 60  # characters of a value quoted in a reason
FREE_TEXT_WORDS = 3  # a value of this many words is composed text, not a name to look up


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
        stripped = value.strip()
        if stripped[:1] in "[{":  # a JSON text inside a result (BFCL answers are JSON)
            try:
                yield from _strings(json.loads(stripped))
            except ValueError:
                pass
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


# (the argument names checked, None: all; whether any string counts or only free text)
_Checked = tuple[set[str] | None, bool]


def _checked_arguments(task: Task) -> dict[str, _Checked] | None:
    """Tool -> what of its arguments is checked; None: BFCL's ground truth, every argument of
    every call, free text only (BFCL's checker allows calls beyond the ground truth)."""
    if "bfcl_ground_truth" in task.metadata:
        return None
    checked: dict[str, _Checked] = {}
    specs = [task.invocation, *(t.invocation for t in task.turns)]
    for spec in [s for s in specs if s is not None]:
        for call in spec.calls:
            names, whole = checked.get(call.tool, (set(), False))
            assert names is not None
            names.update(
                name
                for name, matcher in call.arguments.items()
                if matcher.kind in _FIXED and not matcher.optional
            )
            checked[call.tool] = (names, whole or not spec.allow_extra)
    return checked


def _checked_values(
    arguments: dict[str, Any], names: set[str] | None, whole: bool
) -> Iterator[tuple[str, str]]:
    for name, value in arguments.items():
        if names is None or name in names:
            for text in _strings(value):
                if whole or len(text.split()) >= FREE_TEXT_WORDS:
                    yield name, text


def unseen_gold_arguments(spans: Iterable[Span], task: Task) -> list[str]:
    """The oracle run's fixed string arguments that appear in nothing the agent could have read
    before the call, each as `tool(argument='value')`, in call order."""
    spans = sorted(spans, key=lambda s: int(s.get("start_time_unix_nano") or 0))
    checked = _checked_arguments(task)
    shown = [_norm(task.instruction)]
    for span in spans:  # the tools as listed: an agent always has them
        attrs = span.get("attributes")
        if isinstance(attrs, dict) and attrs.get(sc.MCP_METHOD_NAME) == "tools/list":
            shown += [_norm(text) for text in _strings(attrs.get(sc.RPC_RESULT))]
    turns = [
        (int(s.get("start_time_unix_nano") or 0), _norm(str(attrs[sc.TURN_USER])))
        for s in spans
        if isinstance(attrs := s.get("attributes"), dict) and sc.TURN_USER in attrs
    ]
    # BFCL scores states and results, not the gold's arguments: a value counts only where they
    # hold it (a message the state keeps nowhere may be worded any way); read only when needed
    scored: list[str] = []
    found: list[str] = []
    seen_results: list[str] = []
    for call in agent_calls(spans):
        names, whole = (None, False) if checked is None else checked.get(call.tool, (set(), False))
        readable = shown + [text for start, text in turns if start <= call.start_ns]
        readable += seen_results
        for name, value in _checked_values(call.arguments or {}, names, whole):
            core = _norm(value).strip(_EDGES)
            if not core or any(_contains(text, core) for text in readable):
                continue
            if checked is None:
                scored = scored or _scored_texts(task)
                if not any(_contains(text, core) for text in scored):
                    continue
            quoted = value if len(value) <= _SHOWN_MAX else value[: _SHOWN_MAX - 1] + "…"
            found.append(f"{call.tool}({name}={quoted!r})")
        if call.result is not None:
            seen_results += [_norm(t) for t in _strings(call.result)]
    return found


def _scored_texts(task: Task) -> list[str]:
    """The strings a task's expectations hold (expected results, predicate values)."""
    expected = task.model_dump(
        mode="json",
        include={
            "turns": {"__all__": {"invocation", "outcome"}},
            "invocation": True,
            "outcome": True,
        },
    )
    return [_norm(text) for text in _strings(expected)] or [""]


def _contains(text: str, core: str) -> bool:
    # the substring test first: the word-boundary search runs only where it can match
    return core in text and re.search(rf"(?<!\w){re.escape(core)}(?!\w)", text) is not None
