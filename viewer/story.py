"""What happened in a run, in words: a transcript built from its trace, for the top of the
trace page.

User turns, the model's messages where the `/llm/` proxy recorded them (viewer.conversation),
each tool call the agent made with its arguments and a readable result, errors, in time order;
then the checks tracecard itself ran (outcome probes: verifier spans), apart from the agent's
calls. Turn notices (tracecard telling an upstream a turn began) are verifier spans too, but
not checks: they stand in the transcript where the turn began, labelled as what they are.
Only the first `MAX_CALLS` calls are read with their payloads (the waterfall lists every span),
so a 5,000-span trace costs one bounded query here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from sqlalchemy import select

from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow, SpanRow
from tracecard.traces.store import Store, span_row_to_dict
from tracecard.viewer.conversation import ModelView, TranscriptEntry
from tracecard.viewer.payloads import Image, fitted, parse_json_text, readable_result
from tracecard.viewer.trace_view import is_probe_traffic, is_turn_notice, span_error

MAX_CALLS: Final = 60  # agent calls read with payloads for the transcript
MAX_CHECKS: Final = 40  # verifier spans read for the checks list
ARGUMENT_CHARS: Final = 2000
ArgumentsOf = Callable[[str], dict[str, Any] | None]  # span id -> the call's arguments


@dataclass(frozen=True)
class StoryEntry:
    """One line of the transcript."""

    # user | assistant | reasoning | refusal | asks | call | tool | model_error | notice | other
    kind: str
    who: str  # "user", "model", "agent called lookup_order", ...
    text: str
    span_id: str
    at_ns: int
    call_id: str = ""  # a tool call's id, as recorded
    result: str | None = None  # a call's readable result
    images: tuple[Image, ...] = ()
    error: str | None = None
    cut: str = ""  # why the text is incomplete
    duration_ns: int | None = None
    target: str = ""  # the span that executed a requested call
    answers: str = ""  # a multi round-trip call: the agent's answers to the server, per round
    repeats: tuple[str, ...] = ()  # the spans of the identical calls that came right after it


@dataclass
class Story:
    """The transcript and the checks."""

    entries: list[StoryEntry] = field(default_factory=list)
    checks: list[StoryEntry] = field(default_factory=list)
    calls_total: int = 0  # agent calls the run made
    calls_shown: int = 0
    more_from: str | None = None  # the first call not shown (the waterfall has it)
    spans: dict[str, dict[str, Any]] = field(default_factory=dict)  # the spans read, by id


def _arguments(raw: Any) -> str:
    text = fitted(parse_json_text(raw)) if raw not in (None, "") else "(no arguments)"
    if len(text) > ARGUMENT_CHARS:
        return f"{text[:ARGUMENT_CHARS]}… ({len(text)} characters)"
    return text


def _duration(span: dict[str, Any]) -> int | None:
    end = span.get("end_time_unix_nano")
    return None if end is None else max(0, int(end) - int(span.get("start_time_unix_nano") or 0))


def call_entry(span: dict[str, Any], requested: bool = False) -> StoryEntry | None:
    """A tool call the agent made (as the proxy recorded it), or None for other spans."""
    attributes = span.get("attributes") or {}
    if attributes.get(sc.ROLE) != sc.ROLE_AGENT or attributes.get(sc.GEN_AI_PROVIDER_NAME):
        return None
    tool = attributes.get(sc.GEN_AI_TOOL_NAME)
    method = attributes.get(sc.MCP_METHOD_NAME)
    if tool is None and method not in (None, "tools/call"):
        return None  # initialize, tools/list...: plumbing, in the waterfall only
    if sc.MRTR_ROUND in attributes:
        return None  # one round of a multi round-trip call: its parent is the call
    raw = attributes.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS, attributes.get(sc.REQUEST_BODY))
    result = attributes.get(sc.GEN_AI_TOOL_CALL_RESULT, attributes.get(sc.RESPONSE_BODY))
    readable = readable_result(result) if result is not None else None
    error = span_error(span)
    if error is None and readable is not None and readable.is_error:
        error = "the tool answered isError"
    name = str(tool or span.get("name") or "call")
    return StoryEntry(
        kind="call",
        who=f"{'then ' if requested else ''}called {name}",
        text=_arguments(raw),
        span_id=str(span["span_id"]),
        at_ns=int(span.get("start_time_unix_nano") or 0),
        call_id=str(attributes.get("gen_ai.tool.call.id") or ""),
        result=readable.text if readable is not None else None,
        images=tuple(readable.images) if readable is not None else (),
        error=error,
        cut=(
            f"cut by the recorder: {readable.cut_from} bytes originally"
            if readable is not None and readable.cut_from
            else ""
        ),
        duration_ns=_duration(span),
        answers=_answers(attributes.get(sc.MRTR_ANSWERS)),
    )


def _answers(raw: Any) -> str:
    """The agent's answers to a server's questions (MCP multi round-trip), one line each:
    an elicitation's action and content, a sampled message's text, else the JSON."""
    rounds = parse_json_text(raw) if isinstance(raw, str) else None
    if not isinstance(rounds, list):
        return ""
    lines = []
    for entry in rounds:
        if not isinstance(entry, dict) or not isinstance(entry.get("responses"), dict):
            continue
        for answer in entry["responses"].values():
            lines.append(f"round {entry.get('round')}: {_answer(answer)}")
    return "\n".join(lines)


def _answer(answer: Any) -> str:
    if isinstance(answer, dict) and "action" in answer:  # elicitation
        content = answer.get("content")
        return f"{answer['action']} {fitted(content)}" if content else str(answer["action"])
    content = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(content, dict) and isinstance(content.get("text"), str):  # sampling
        return f"sampled {content['text']!r}"
    return fitted(answer)


def check_entry(span: dict[str, Any]) -> StoryEntry:
    """An outcome probe tracecard ran after (or between) the agent's turns."""
    attributes = span.get("attributes") or {}
    probe = attributes.get(sc.PROBE_ID) or attributes.get(sc.GEN_AI_TOOL_NAME) or span.get("name")
    what = attributes.get(sc.GEN_AI_TOOL_NAME) or attributes.get(sc.PROBE_KIND) or "probe"
    turn = attributes.get(sc.TURN_INDEX)
    observed = attributes.get(sc.PROBE_VALUE)
    readable = readable_result(observed) if observed is not None else None
    error = attributes.get(sc.PROBE_ERROR) or span_error(span)
    return StoryEntry(
        kind="check",
        who=f"check {probe}" + (f" after turn {turn}" if turn is not None else ""),
        text=f"tracecard read {what}",
        span_id=str(span["span_id"]),
        at_ns=int(span.get("start_time_unix_nano") or 0),
        result=readable.text if readable is not None else None,
        error=str(error) if error else None,
        duration_ns=_duration(span),
    )


def notice_entry(span: dict[str, Any]) -> StoryEntry:
    """A turn notice: tracecard told an upstream that a turn began (server/evaluation/turn_notice),
    a step of the turn handout, shown where it happened: not a check and not the agent's call."""
    attributes = span.get("attributes") or {}
    turn = attributes.get(sc.TURN_INDEX)
    upstream = attributes.get(sc.UPSTREAM) or "the upstream"
    tool = attributes.get(sc.GEN_AI_TOOL_NAME)
    return StoryEntry(
        kind="notice",
        who="turn notice" + (f": turn {turn} begins" if turn is not None else ""),
        text=f"tracecard told {upstream}"
        + (f" with {tool}" if tool else "")
        + " (the agent neither sees nor calls it)",
        span_id=str(span["span_id"]),
        at_ns=int(span.get("start_time_unix_nano") or 0),
        error=span_error(span),
        duration_ns=_duration(span),
    )


def _model_entry(entry: TranscriptEntry, model: ModelView) -> StoryEntry | None:
    if entry.kind == "tool_result" and entry.call_id in model.executed:
        return None  # the executed call shows its result itself
    kinds = {"tool_call": "asks", "tool_result": "tool", "model_error": "model_error"}
    kind = kinds.get(entry.kind) or (entry.kind if entry.kind != "text" else entry.role)
    if entry.kind == "tool_call":
        who = f"model asks for {entry.label}"
    elif entry.kind == "tool_result":
        who = "tool result fed back"
    elif entry.kind == "model_error":
        who = "model error"
    else:
        who = {"assistant": "model", "system": "system"}.get(entry.role, entry.role)
        who += f" ({entry.kind})" if entry.kind not in ("text", "other") else ""
    return StoryEntry(
        kind=kind,
        who=who,
        text=entry.text,
        span_id=entry.span_id,
        at_ns=entry.at_ns,
        call_id=entry.call_id,
        cut=entry.cut,
        error=entry.text if entry.kind == "model_error" else None,
        target=model.executed.get(entry.call_id, "") if entry.kind == "tool_call" else "",
    )


def _turn_entry(span: dict[str, Any]) -> StoryEntry | None:
    user = (span.get("attributes") or {}).get(sc.TURN_USER)
    if not isinstance(user, str):
        return None
    return StoryEntry(
        kind="user",
        who=f"user ({span.get('name')})",
        text=user,
        span_id=str(span["span_id"]),
        at_ns=int(span.get("start_time_unix_nano") or 0),
    )


def _is_notice(span: dict[str, Any]) -> bool:
    return is_turn_notice(span.get("name"), (span.get("attributes") or {}).get(sc.ROLE))


def _is_tool_call(span: dict[str, Any]) -> bool:
    """An agent tool call tracecard observed, from the outline (role and tool name columns)."""
    attributes = span.get("attributes") or {}
    return attributes.get(sc.ROLE) == sc.ROLE_AGENT and sc.GEN_AI_TOOL_NAME in attributes


def build_story(
    store: Store,
    run: RunRow,
    outline: Sequence[dict[str, Any]],
    full: Sequence[dict[str, Any]] | None,
    model: ModelView | None,
) -> Story:
    """The transcript of `run`: from its full spans when they were read (a run with model
    spans), else from its first `MAX_CALLS` agent calls and its checks."""
    story = Story()
    total: int | None = None
    if full is not None:
        spans: list[dict[str, Any]] = list(full)
    else:
        # the outline says which spans are the agent's tool calls and which are checks: read
        # the first MAX_CALLS calls, the checks and the root (whose events are the scores)
        # in one query by primary key
        call_ids = [s["span_id"] for s in outline if _is_tool_call(s)]
        total = len(call_ids)
        if total > MAX_CALLS:
            story.more_from = call_ids[MAX_CALLS]
        verifier = [
            s for s in outline if (s.get("attributes") or {}).get(sc.ROLE) == sc.ROLE_VERIFIER
        ]
        notices = [s["span_id"] for s in verifier if _is_notice(s)]
        checks = [s["span_id"] for s in verifier if sc.PROBE_ID in s["attributes"]][:MAX_CHECKS]
        turns = [
            s["span_id"]
            for s in outline
            if str(s.get("name") or "").startswith("turn ")
            and sc.ROLE not in (s.get("attributes") or {})
        ]
        wanted = [*call_ids[:MAX_CALLS], *checks, *notices, *turns, run.root_span_id]
        spans = sorted(
            spans_by_id(store, wanted),
            key=lambda s: (s["start_time_unix_nano"], s["span_id"]),
        )
    story.spans = {str(s["span_id"]): s for s in spans}
    requested = set(model.requested_by) if model is not None else set()
    calls: list[StoryEntry] = []
    for span in spans:
        attributes = span.get("attributes") or {}
        if attributes.get(sc.ROLE) == sc.ROLE_VERIFIER:
            if _is_notice(span):
                story.entries.append(notice_entry(span))
            elif is_probe_traffic(span):
                pass  # a probe client's handshake and requests: in the waterfall, under the probe
            elif len(story.checks) < MAX_CHECKS:
                story.checks.append(check_entry(span))
            continue
        entry = call_entry(span, span["span_id"] in requested)
        if entry is not None:
            calls.append(entry)
        elif model is None and (turn := _turn_entry(span)) is not None:
            story.entries.append(turn)
    story.calls_total = total if total is not None else len(calls)
    if len(calls) > MAX_CALLS:
        story.more_from = calls[MAX_CALLS].span_id
    story.calls_shown = min(len(calls), MAX_CALLS)
    story.entries += calls[:MAX_CALLS]
    if model is not None:
        story.entries += [e for t in model.transcript if (e := _model_entry(t, model)) is not None]
    story.entries.sort(key=lambda e: e.at_ns)  # stable: a request's messages keep their order
    story.entries = _fold_repeats(story.entries)
    story.checks.sort(key=lambda e: e.at_ns)
    return story


def _fold_repeats(entries: list[StoryEntry]) -> list[StoryEntry]:
    """Calls made again and again with the same arguments and the same result, one right after
    the other, as one entry marked ×N: a loop reads as a loop, not as N screens of one result."""
    folded: list[StoryEntry] = []
    for entry in entries:
        last = folded[-1] if folded else None
        if (
            last is not None
            and entry.kind == "call" == last.kind
            and (entry.who, entry.text, entry.result, entry.error, entry.answers, entry.images)
            == (last.who, last.text, last.result, last.error, last.answers, last.images)
        ):
            folded[-1] = replace(last, repeats=(*last.repeats, entry.span_id))
        else:
            folded.append(entry)
    return folded


def spans_by_id(store: Store, span_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The spans with these ids (one query; ids not stored are left out)."""
    if not span_ids:
        return []
    table: Any = SpanRow
    with store.session() as session:
        rows = session.scalars(select(table).where(table.span_id.in_(list(set(span_ids)))))
        return [span_row_to_dict(row) for row in rows]


def arguments_reader(known: dict[str, dict[str, Any]]) -> ArgumentsOf:
    """Arguments by span id, from the spans already read (`known`)."""
    cache: dict[str, dict[str, Any] | None] = {}

    def arguments_of(span_id: str) -> dict[str, Any] | None:
        if span_id not in cache:
            attributes = (known.get(span_id) or {}).get("attributes") or {}
            parsed = parse_json_text(attributes.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS))
            cache[span_id] = parsed if isinstance(parsed, dict) else None
        return cache[span_id]

    return arguments_of
