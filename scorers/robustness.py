"""An experiment's environment in its scorecard: what was replayed, which faults were injected,
and how often the agent recovered (docs/replay.md, "Robustness"). Pure: read from the stored
spans of its runs, whose outcome scores say which faulted trials still reached the outcome.

Counts (faulted calls, recovered calls, trials), and "with faults vs without": `compare`'s own
paired comparison of `pass_rate` (`scorers/compare.py`, made in `scorers/fault_comparison.py`)
with the unfaulted experiment as A, so its numbers and words are `tracecard compare`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from tracecard.traces import semconv as sc

from .environment import REPLAY_DIVERGED, environment_flags, fault_outcomes
from .types import Span

__all__ = [
    "FaultComparison",
    "FaultKind",
    "PairedInterval",
    "PairedTask",
    "ReplaySummary",
    "Robustness",
    "TaskRobustness",
    "robustness_of",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FaultKind(_Model):
    """One fault kind over the experiment: its faulted calls and trials, and the recovered ones
    (a trial recovered when it recovered from every fault of this kind it met)."""

    kind: str
    faulted_calls: int
    recovered_calls: int
    runs: int
    recovered_runs: int

    def line(self) -> str:
        return (
            f"after {self.kind} the agent recovered in {self.recovered_runs}/{self.runs} trials "
            f"({self.recovered_calls}/{self.faulted_calls} faulted calls)"
        )


class TaskRobustness(_Model):
    """One task: its trials, the faulted ones, those that recovered from every fault, and the
    faulted trials whose outcome passed."""

    task_id: str
    runs: int
    faulted_runs: int
    recovered_runs: int
    faulted_outcome_passed: int


class ReplaySummary(_Model):
    """What replay answered: agent and probe requests recorded, missed (an error) or forwarded
    live, and the trials flagged `replay_diverged`."""

    source: str | None
    mode: str | None
    runs: int
    recorded: int
    missed: int
    live: int
    diverged_runs: int

    def line(self) -> str:
        return (
            f"replayed from {self.source} ({self.mode}): {self.recorded} answers recorded, "
            f"{self.missed} missed, {self.live} live; {self.diverged_runs}/{self.runs} trials "
            f"diverged"
        )


class PairedTask(_Model):
    """One task of the comparison, in `compare`'s keys: `a` without faults, `b` with them."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    task_id: str
    a: float | None
    b: float | None
    difference: float | None  # b - a
    cls: str = Field(alias="class")


class PairedInterval(_Model):
    """The bootstrap interval of mean(b - a) over the paired tasks."""

    mean: float
    low: float
    high: float
    n: int


class FaultComparison(_Model):
    """With faults vs without: `compare A B` with A the experiment without faults and B this
    one (same component, formula, verdict and reason); `A better` means the faults cost the
    agent. `pass_rate` and `pass_hat_k` (at `k`, the most trials both have) are each side's
    scorecard figure (mean over tasks)."""

    a: str  # the experiment without faults
    b: str  # this experiment
    chosen_by: str  # why A: its replay source, or the latest unfaulted run of the config
    component: str
    verdict: Literal["A better", "B better", "undecided"]
    reason: str
    interval: PairedInterval | None
    counts: dict[str, int]
    pass_rate: dict[str, float | None]  # {"a": ..., "b": ...}
    k: int | None
    pass_hat_k: dict[str, float | None]  # at k
    tasks: list[PairedTask]

    def line(self) -> str:
        """The comparison in `tracecard compare`'s words (its verdict line)."""
        said = {
            "A better": "without faults is better (the faults cost the agent)",
            "B better": "with faults is better",
        }.get(self.verdict, "undecided: the data cannot separate them")
        rates = " → ".join("–" if v is None else f"{v:.2f}" for v in self.pass_rate.values())
        detail = ""
        if self.interval is not None:
            i = self.interval
            detail = (
                f" (mean difference with − without {i.mean:+.3f}, "
                f"95% CI [{i.low:+.3f}, {i.high:+.3f}] over {i.n} tasks)"
            )
        return (
            f"with faults vs without ({self.a}, {self.chosen_by}): {self.component} pass_rate "
            f"{rates}; verdict: {said}{detail} — {self.reason}"
        )


class Robustness(_Model):
    """The scorecard's `robustness` section (only for an experiment with an environment)."""

    faults: dict[str, JsonValue] | None  # the fault plan, as stored
    replay: ReplaySummary | None
    kinds: list[FaultKind]
    tasks: list[TaskRobustness]
    # a faulted experiment whose suite version has an unfaulted one to pair with
    without_faults: FaultComparison | None = None

    def lines(self) -> list[str]:
        """One line per fact, as `tracecard compare`, the Markdown and the API give them."""
        found = [self.replay.line()] if self.replay is not None else []
        if self.faults is not None:
            rules = self.faults.get("rules")
            count = len(rules) if isinstance(rules, list) else 0
            found.append(f"fault plan: seed {self.faults.get('seed')}, {count} rule(s)")
        if self.without_faults is not None:
            found.append(self.without_faults.line())
        return found + [kind.line() for kind in self.kinds]


def _replay(
    plan: Mapping[str, Any], runs: Sequence[tuple[str, str]], spans: Mapping[str, Sequence[Span]]
) -> ReplaySummary:
    marks: dict[str, int] = {sc.REPLAY_RECORDED: 0, sc.REPLAY_MISS: 0, sc.REPLAY_LIVE: 0}
    diverged = 0
    for run_id, _task in runs:
        mine = spans.get(run_id, [])
        for span in mine:
            mark = (span.get("attributes") or {}).get(sc.REPLAY)
            if mark in marks:
                marks[mark] += 1
        diverged += REPLAY_DIVERGED in environment_flags(mine)
    return ReplaySummary(
        source=plan.get("source"),
        mode=plan.get("mode"),
        runs=len(runs),
        recorded=marks[sc.REPLAY_RECORDED],
        missed=marks[sc.REPLAY_MISS],
        live=marks[sc.REPLAY_LIVE],
        diverged_runs=diverged,
    )


def robustness_of(
    environment: Mapping[str, Any],
    runs: Sequence[tuple[str, str]],
    spans: Mapping[str, Sequence[Span]],
    outcome_passed: Mapping[str, bool],
) -> Robustness:
    """The section from the experiment's `environment`, its runs as (run id, task id), their
    spans by run id and whether each run's outcome passed."""
    kinds: dict[str, dict[str, int]] = {}
    tasks: dict[str, dict[str, int]] = {}
    for run_id, task_id in runs:
        outcomes = fault_outcomes(spans.get(run_id, []))
        task = tasks.setdefault(
            task_id,
            {"runs": 0, "faulted_runs": 0, "recovered_runs": 0, "faulted_outcome_passed": 0},
        )
        task["runs"] += 1
        if not outcomes:
            continue
        task["faulted_runs"] += 1
        task["recovered_runs"] += all(o["recovered"] for o in outcomes)
        task["faulted_outcome_passed"] += bool(outcome_passed.get(run_id))
        for kind in {o["kind"] for o in outcomes}:
            mine = [o for o in outcomes if o["kind"] == kind]
            entry = kinds.setdefault(
                kind, {"faulted_calls": 0, "recovered_calls": 0, "runs": 0, "recovered_runs": 0}
            )
            entry["faulted_calls"] += len(mine)
            entry["recovered_calls"] += sum(o["recovered"] for o in mine)
            entry["runs"] += 1
            entry["recovered_runs"] += all(o["recovered"] for o in mine)
    plan = environment.get("replay")
    faults = environment.get("faults")
    return Robustness(
        faults=dict(faults) if isinstance(faults, Mapping) else None,
        replay=_replay(plan, runs, spans) if isinstance(plan, Mapping) else None,
        kinds=[FaultKind(kind=k, **v) for k, v in sorted(kinds.items())],
        tasks=[TaskRobustness(task_id=t, **v) for t, v in sorted(tasks.items())],
    )
