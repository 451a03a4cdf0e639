"""Task defects found by baseline agents (docs/audit.md): pure functions over the baselines'
scored runs; running the baselines is `tracecard.server.audit`'s job.

Each finding names the runs that show it, so a person can open their traces:
- `passable_by_nothing`: the null agent (no call, no answer) passed outcome, or completion on a
  task that expects completion;
- `oracle_fails`: the oracle (the expected calls, the expected answer) failed a component in
  every trial;
- `unseen_gold`: a string the oracle's calls carry, fixed by the expectations (or BFCL's ground
  truth), appears nowhere the agent could read it before the call (`audit_gold`);
- `blind_probe`: a probe observed the same value after the oracle's (passing) run as after doing
  nothing: it cannot tell the task done from not done;
- `weak_invocation`: random-tool (one random call with random arguments) passed invocation;
- `unstable`: the oracle's own trials disagree on a component.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .audit_gold import unseen_gold_arguments
from .calls import probe_observations
from .suite import Task
from .types import Span

__all__ = [
    "AUDIT_CONFIG_PREFIX",
    "BASELINES",
    "DEFECT_KINDS",
    "DEFECT_LABELS",
    "BaselineRun",
    "Finding",
    "TaskAudit",
    "audit_tasks",
    "baseline_run",
    "checks_not_run",
    "first_reason",
    "probe_values",
]

BASELINES = ("null", "oracle", "random-tool")
AUDIT_CONFIG_PREFIX = "audit:"  # a baseline's experiment is configuration `audit:AGENT`

DefectKind = Literal[
    "passable_by_nothing",
    "oracle_fails",
    "unseen_gold",
    "blind_probe",
    "weak_invocation",
    "unstable",
]
DEFECT_KINDS: tuple[DefectKind, ...] = get_args(DefectKind)  # in report order
DEFECT_LABELS: dict[str, str] = {
    "passable_by_nothing": "passable by doing nothing",
    "oracle_fails": "not passable by the oracle",
    "unseen_gold": "gold argument never shown",
    "blind_probe": "blind probe",
    "weak_invocation": "weak invocation",
    "unstable": "unstable",
}
# The components that decide whether a task is done; the composite is derived from them, and
# efficiency judges the process (a gold trajectory may repeat a call, latency varies by machine).
COMPONENTS = ("invocation", "completion", "outcome", "safety")


@dataclass(frozen=True)
class BaselineRun:
    """One scored run of a baseline agent, as the audit reads it."""

    agent: str  # null | oracle | random-tool
    run_id: str
    task_id: str
    trial: int
    status: str
    passed: Mapping[str, bool | None]  # component -> pass (None: not evaluated)
    reasons: Mapping[str, str] = field(default_factory=dict)  # component -> why it failed
    # "TURN/PROBE" (TURN "end" for the probes run when the run finished) -> the observed value
    # as canonical JSON, or None when the probe could not observe anything
    probes: Mapping[str, str | None] = field(default_factory=dict)
    # (oracle runs) fixed gold arguments found nowhere the agent could read them, in call order
    unseen: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One defect of one task: its kind, why, and the runs that show it."""

    kind: DefectKind
    reason: str
    runs: tuple[str, ...]


@dataclass(frozen=True)
class TaskAudit:
    """A task and what the baselines found wrong with it (no findings: nothing found)."""

    task_id: str
    findings: tuple[Finding, ...]
    baselines: Mapping[str, Mapping[str, str]]  # agent -> component -> "2/2" passes/evaluated

    @property
    def kinds(self) -> list[str]:
        """The kinds of defect found, in `DEFECT_KINDS` order."""
        found = {f.kind for f in self.findings}
        return [k for k in DEFECT_KINDS if k in found]


def probe_values(spans: Iterable[Span], turns: int) -> dict[str, str | None]:
    """What each probe observed in a run, as `BaselineRun.probes` keys it: "TURN/PROBE" (TURN
    "end" for the probes run when the run finished) -> canonical JSON, None for an error."""
    spans = list(spans)
    found: dict[str, str | None] = {}
    for turn in [None, *range(turns)]:
        for probe_id, seen in probe_observations(spans, turn).items():
            key = f"{'end' if turn is None else turn}/{probe_id}"
            found[key] = None if seen.error else json.dumps(seen.value, sort_keys=True)
    return found


def baseline_run(
    agent: str,
    *,
    run_id: str,
    task_id: str,
    trial: int,
    status: str,
    scores: Iterable[tuple[str, bool | None, Any]],
    spans: Iterable[Span] | None = None,
    turns: int = 0,
    task: Task | None = None,
) -> BaselineRun:
    """One baseline run as the audit reads it, from its stored scores (component, passed,
    evidence) and, for the probe comparison of null and oracle, its spans; an oracle run with
    its task also gets the gold arguments it used that the agent is never shown."""
    scores = list(scores)
    spans = list(spans) if spans is not None else None
    unseen: tuple[str, ...] = ()
    if agent == "oracle" and spans is not None and task is not None:
        unseen = tuple(unseen_gold_arguments(spans, task))
    return BaselineRun(
        agent=agent,
        run_id=run_id,
        task_id=task_id,
        trial=trial,
        status=status,
        passed={component: passed for component, passed, _ in scores},
        reasons={c: first_reason(evidence) for c, passed, evidence in scores if passed is False},
        probes=probe_values(spans, turns) if spans is not None else {},
        unseen=unseen,
    )


def checks_not_run(agents: Sequence[str], trials: int) -> dict[str, str | None]:
    """Each check, and why it did not run with these baselines and trials (None: it ran)."""
    missing = {a: f"needs the {a} baseline" for a in BASELINES}
    return {
        "passable_by_nothing": None if "null" in agents else missing["null"],
        "oracle_fails": None if "oracle" in agents else missing["oracle"],
        "unseen_gold": None if "oracle" in agents else missing["oracle"],
        "blind_probe": None
        if {"null", "oracle"} <= set(agents)
        else "needs the null and oracle baselines",
        "weak_invocation": None if "random-tool" in agents else missing["random-tool"],
        "unstable": (
            None
            if "oracle" in agents and trials >= 2
            else "needs the oracle baseline with --trials 2 or more"
        ),
    }


def first_reason(evidence: Any, limit: int = 160) -> str:
    """The first failure a component's evidence names, in one short line."""
    text = _reason(evidence) or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(evidence: Any) -> str | None:
    if not isinstance(evidence, dict):
        return None
    for position, turn in enumerate(evidence.get("turns") or []):
        if not isinstance(turn, dict) or turn.get("passed") is True:
            continue
        found = _reason(turn.get("evidence", turn))
        if found:
            return f"turn {turn.get('turn', turn.get('index', position))}: {found}"
    for predicate in evidence.get("predicates") or []:
        if isinstance(predicate, dict) and predicate.get("holds") is False:
            observed = predicate.get("observed", "nothing")
            return (
                f"{predicate.get('probe')} {predicate.get('path')} {predicate.get('op')} "
                f"{predicate.get('value')!r}: observed {observed!r}"
            )
    for expected in evidence.get("expected") or []:
        if not isinstance(expected, dict) or expected.get("span_id"):
            continue
        if expected.get("why"):
            return f"expected {expected.get('tool')}: {expected['why']}"
        closest = [c for c in expected.get("closest") or [] if isinstance(c, dict)]
        if closest and closest[0].get("why"):
            why = closest[0]["why"]
            return f"expected {expected.get('tool')}, closest call differs: " + (
                "; ".join(map(str, why)) if isinstance(why, list) else str(why)
            )
    for check in evidence.get("checks") or []:
        if isinstance(check, dict) and check.get("passed") is False and check.get("reason"):
            return str(check["reason"])
    if evidence.get("reason"):
        return str(evidence["reason"])
    violations = evidence.get("violations")
    if isinstance(violations, list) and violations and isinstance(violations[0], dict):
        first = violations[0]
        return f"{first.get('rule', first.get('kind', 'violation'))}: {first.get('tool', '')}"
    return None


def _tally(runs: Sequence[BaselineRun], component: str) -> str:
    evaluated = [r.passed.get(component) for r in runs if r.passed.get(component) is not None]
    return f"{sum(1 for p in evaluated if p)}/{len(evaluated)}" if evaluated else "n/e"


def _status_note(runs: Iterable[BaselineRun]) -> str:
    odd = sorted({r.status for r in runs if r.status != "finished"})
    return f" (run status: {', '.join(odd)})" if odd else ""


def _passable(null: Sequence[BaselineRun], expects_completion: bool) -> Finding | None:
    for component, why in (
        ("outcome", "the start state already satisfies the outcome's predicates"),
        ("completion", "the completion checks pass without an answer"),
    ):
        if component == "completion" and not expects_completion:
            continue
        passing = [r for r in null if r.passed.get(component) is True]
        if passing:
            reason = f"null passed {component} in {len(passing)}/{len(null)} trial(s): {why}"
            return Finding("passable_by_nothing", reason, tuple(r.run_id for r in passing))
    return None


def _oracle_fails(oracle: Sequence[BaselineRun]) -> Finding | None:
    for component in COMPONENTS:
        judged = [r for r in oracle if r.passed.get(component) is not None]
        if judged and all(r.passed.get(component) is False for r in judged):
            why = next((r.reasons.get(component) for r in judged if r.reasons.get(component)), "")
            reason = (
                f"oracle failed {component} in {len(judged)}/{len(judged)} trial(s)"
                f"{_status_note(judged)}" + (f": {why}" if why else "")
            )
            return Finding("oracle_fails", reason, tuple(r.run_id for r in judged))
    return None


def _unseen(oracle: Sequence[BaselineRun]) -> Finding | None:
    showing = [r for r in oracle if r.unseen]
    if not showing:
        return None
    first = showing[0]
    more = len(first.unseen) - 1
    reason = (
        f"the oracle's {first.unseen[0]} uses text the agent is never shown (not in the task's "
        "text, the user turns so far or any earlier result): an agent has to guess it"
        + (f"; {more} more such argument(s)" if more else "")
    )
    return Finding("unseen_gold", reason, (first.run_id,))


def _blind(null: Sequence[BaselineRun], oracle: Sequence[BaselineRun]) -> Finding | None:
    # Only where the oracle passes the outcome: when it cannot, the probe seeing no change is
    # that failure's consequence, already flagged as `oracle_fails` or `unstable`.
    if not null or not oracle or not all(r.passed.get("outcome") is True for r in oracle):
        return None
    keys = sorted({k for r in [*null, *oracle] for k in r.probes})
    blind = []
    for key in keys:
        seen = {r.probes.get(key) for r in [*null, *oracle]}
        if len(seen) == 1 and None not in seen:
            blind.append(key)
    if not blind:
        return None
    turns: dict[str, list[str]] = defaultdict(list)
    for key in blind:
        turn, _, probe = key.partition("/")
        turns[probe].append(turn)
    where = ", ".join(
        probe if found == ["end"] else f"{probe} (turn {', '.join(found)})"
        for probe, found in turns.items()
    )
    reason = (
        f"probe {where} observed the same value after the oracle's run as after doing "
        "nothing: it cannot see what the agent changes"
    )
    return Finding("blind_probe", reason, (oracle[0].run_id, null[0].run_id))


def _weak(random_tool: Sequence[BaselineRun]) -> Finding | None:
    passing = [r for r in random_tool if r.passed.get("invocation") is True]
    if not passing:
        return None
    reason = (
        f"random-tool passed invocation in {len(passing)}/{len(random_tool)} trial(s): "
        "one random call with random arguments meets the expectation"
    )
    return Finding("weak_invocation", reason, tuple(r.run_id for r in passing))


def _unstable(oracle: Sequence[BaselineRun]) -> Finding | None:
    if len(oracle) < 2:
        return None
    for component in COMPONENTS:
        verdicts = [r.passed.get(component) for r in oracle]
        judged = {v for v in verdicts if v is not None}
        if len(judged) > 1:
            failing = [r for r in oracle if r.passed.get(component) is False]
            why = failing[0].reasons.get(component, "") if failing else ""
            reason = (
                f"the oracle's trials disagree on {component} "
                f"({_tally(oracle, component)} passed): the environment is not deterministic"
                + (f"; a failing trial: {why}" if why else "")
            )
            return Finding("unstable", reason, tuple(r.run_id for r in oracle))
    return None


def audit_tasks(
    task_ids: Sequence[str],
    runs: Iterable[BaselineRun],
    expects_completion: Mapping[str, bool] | None = None,
) -> list[TaskAudit]:
    """The findings per task (in `task_ids` order) from the baselines' runs. A check needs its
    baselines: passable and blind need null (blind also the oracle), weak needs random-tool,
    unstable needs two oracle trials."""
    grouped: dict[tuple[str, str], list[BaselineRun]] = defaultdict(list)
    for run in runs:
        grouped[(run.task_id, run.agent)].append(run)
    audits = []
    for task_id in task_ids:
        null = sorted(grouped.get((task_id, "null"), []), key=lambda r: r.trial)
        oracle = sorted(grouped.get((task_id, "oracle"), []), key=lambda r: r.trial)
        random_tool = sorted(grouped.get((task_id, "random-tool"), []), key=lambda r: r.trial)
        completion = (expects_completion or {}).get(task_id, True)
        found = [
            _passable(null, completion),
            _oracle_fails(oracle),
            _unseen(oracle),
            _blind(null, oracle),
            _weak(random_tool),
            _unstable(oracle),
        ]
        baselines = {
            agent: {c: _tally(group, c) for c in COMPONENTS}
            for agent, group in (("null", null), ("oracle", oracle), ("random-tool", random_tool))
            if group
        }
        audits.append(TaskAudit(task_id, tuple(f for f in found if f), baselines))
    return audits
