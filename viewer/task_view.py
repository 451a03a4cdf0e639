"""What a run was asked: its task's instruction, user turns and what each scorer expects, in
words, for the top of the trace page (read from the suite version the run was a trial of)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from tracecard.scorers.matchers import ArgMatcher
from tracecard.scorers.spec import InvocationSpec, OutcomeSpec
from tracecard.scorers.suite import Suite, SuiteError, Task
from tracecard.scorers.suite_cache import cached_suite
from tracecard.traces import queries
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store


@dataclass(frozen=True)
class ExpectedCallView:
    """An expected call in words: the tool and each argument's matcher."""

    tool: str
    arguments: list[tuple[str, str]]  # (argument, what it must be)


@dataclass
class TaskView:
    """The task, as the page states it."""

    task_id: str
    instruction: str
    turns: list[str] = field(default_factory=list)
    calls: list[ExpectedCallView] = field(default_factory=list)
    order: str | None = None  # the invocation order mode, when calls are expected
    no_calls: bool = False  # the task expects the agent to call nothing
    predicates: list[str] = field(default_factory=list)  # outcome, in words
    answer_checks: list[str] = field(default_factory=list)  # completion, in words


def _short(value: Any, limit: int = 200) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def matcher_text(matcher: ArgMatcher) -> str:
    """An argument matcher in words: `= "A-1001"`, `42.5 ± 0.01`, `matches /x/`."""
    kind = matcher.kind
    optional = " (optional)" if matcher.optional else ""
    if kind == "exact":
        text = f"= {_short(matcher.exact)}"
    elif kind == "number":
        text = f"{matcher.number:g} ± {matcher.tolerance:g}"
    elif kind == "regex":
        text = f"matches /{matcher.regex}/"
    elif kind == "one_of":
        text = f"one of {_short(matcher.one_of)}"
    elif kind == "subset":
        text = f"contains {_short(matcher.subset)}"
    else:
        text = "any value"
    return text + optional


def _calls(spec: InvocationSpec) -> list[ExpectedCallView]:
    return [
        ExpectedCallView(
            tool=call.tool,
            arguments=[(name, matcher_text(m)) for name, m in call.arguments.items()],
        )
        for call in spec.calls
    ]


def _predicates(spec: OutcomeSpec) -> list[str]:
    probes = {probe.id: probe for probe in spec.probes}
    found = []
    for p in spec.predicates:
        probe = probes.get(p.probe)
        source = getattr(probe, "tool", None) or getattr(probe, "url", None) or p.probe
        if p.op in ("exists", "absent"):
            found.append(f"{p.path} {p.op} (probe {p.probe}: {source})")
        else:
            tolerance = f" ± {p.tolerance:g}" if p.op == "approx" else ""
            found.append(
                f"{p.path} {p.op} {_short(p.value)}{tolerance} (probe {p.probe}: {source})"
            )
    return found


def _check_text(spec: dict[str, Any]) -> str:
    kind, *rest = spec.items()
    extra = "".join(f", {k} {_short(v)}" for k, v in rest)
    return f"the answer {kind[0].replace('_', ' ')} {_short(kind[1], 160)}{extra}"


def stored_suite(store: Store, version: str) -> Suite | None:
    """The suite stored as `version`, parsed once (scorers.suite_cache); None when it is no
    longer stored or no longer parses."""

    def read() -> tuple[str, dict[str, Any]] | None:
        row = queries.get_suite(store, version)
        return None if row is None else (row.name, row.document)

    try:
        return cached_suite(version, read)
    except SuiteError:
        return None


def run_task(store: Store, run: RunRow) -> Task | None:
    """The task `run` was a trial of; None for ad-hoc runs or a suite no longer stored."""
    if run.suite_version is None or run.task_id is None:
        return None
    suite = stored_suite(store, run.suite_version)
    if suite is None:
        return None
    try:
        return suite.task(run.task_id)
    except (KeyError, ValueError):
        return None


def task_view(task: Task) -> TaskView:
    """The task in words: instruction, user turns, expected calls, outcome and answer checks."""
    view = TaskView(task_id=task.id, instruction=task.instruction)
    view.turns = [turn.user for turn in task.turns]
    if task.invocation is not None:
        view.order = task.invocation.order
        view.no_calls = task.invocation.expect_no_calls
        view.calls = _calls(task.invocation)
    for index, turn in enumerate(task.turns):
        if turn.invocation is not None:
            for call in _calls(turn.invocation):
                view.calls.append(ExpectedCallView(f"turn {index}: {call.tool}", call.arguments))
        if turn.outcome is not None:
            view.predicates += [f"after turn {index}: {p}" for p in _predicates(turn.outcome)]
    if task.outcome is not None:
        view.predicates += _predicates(task.outcome)
    if task.completion is not None:
        view.answer_checks = [_check_text(check.describe()) for check in task.completion.checks]
        if task.completion.require_finished:
            view.answer_checks.insert(0, "the run ends on its own")
    return view
