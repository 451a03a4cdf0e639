"""Scorecards: per task x component repeat statistics, per-component intervals, agreement."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from .registry import component_key
from .repeats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_mean,
    flip_rate,
    pass_at_k,
    pass_hat_k,
)
from .suite import Suite, suite_version
from .types import ComponentScore

__all__ = [
    "SCORECARD_SCHEMA_VERSION",
    "Agreement",
    "ComponentSummary",
    "ExperimentRef",
    "GateResult",
    "RunRecord",
    "Scorecard",
    "SuiteRef",
    "TaskCard",
    "TaskComponentStats",
    "Verdict",
    "build_scorecard",
    "gate",
]

SCORECARD_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunRecord(_Model):
    """One scored run as the scorecard sees it."""

    run_id: str
    task_id: str
    trial: int = 0
    status: str
    final_answer: str | None = None
    components: list[ComponentScore] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    started_at: datetime | None = None  # UTC; None for a run that never started
    duration_s: float | None = None  # from start to finish, when both are known


class Verdict(_Model):
    """A person's judgement of one component score of one run."""

    run_id: str
    component: str
    agree: bool
    note: str = ""
    author: str = ""


class TaskComponentStats(_Model):
    """Repeat statistics of one component on one task."""

    component: str
    n: int  # runs with a score for this component
    evaluated: int  # of which have a pass/fail
    passes: int
    mean_value: float | None
    pass_rate: float | None
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]
    flip: bool  # both passes and fails among the trials
    scorer: str
    scorer_version: str


class TaskCard(_Model):
    """One task of the suite with its per-component statistics (empty when it has no runs)."""

    task_id: str
    metadata: dict[str, JsonValue]
    runs: int
    components: list[TaskComponentStats]

    def component(self, name: str) -> TaskComponentStats | None:
        """The statistics of one component, if scored."""
        return next((c for c in self.components if c.component == name), None)


MIN_INTERVAL_TASKS = 2  # fewer tasks: `low`/`high` are null ("not available"), never a point


class ComponentSummary(_Model):
    """Mean over tasks (of per-task mean values) with a bootstrap interval (`low`, `high`:
    null when fewer than `MIN_INTERVAL_TASKS` tasks were evaluated)."""

    component: str
    mean: float | None
    low: float | None
    high: float | None
    n_tasks: int
    pass_rate: float | None  # mean over tasks of the per-task pass rate
    flip_rate: float | None


class Agreement(_Model):
    """How often people agreed with one scorer."""

    scorer: str
    n: int
    agree: int
    rate: float


class SuiteRef(_Model):
    """Which suite (and which content of it) the experiment ran."""

    name: str
    version: str


class ExperimentRef(_Model):
    """The experiment: id and the config under test."""

    id: str
    config: dict[str, JsonValue]


class Scorecard(_Model):
    """The exported scorecard (documented in docs/scorecards.md)."""

    schema_version: int = SCORECARD_SCHEMA_VERSION
    suite: SuiteRef
    experiment: ExperimentRef
    bootstrap: dict[str, float]
    components: list[ComponentSummary]
    tasks: list[TaskCard]
    flags: dict[str, int]
    agreement: list[Agreement]
    runs: list[RunRecord]

    def summary(self, component: str) -> ComponentSummary | None:
        """The per-component summary, if that component was scored."""
        return next((c for c in self.components if c.component == component), None)

    def task(self, task_id: str) -> TaskCard | None:
        """The task card, if the task is in the suite."""
        return next((t for t in self.tasks if t.task_id == task_id), None)


def _ordered(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=component_key)


def _task_stats(component: str, scores: Sequence[ComponentScore]) -> TaskComponentStats:
    values = [s.value for s in scores if s.value is not None]
    verdicts = [s.passed for s in scores if s.passed is not None]
    n, c = len(verdicts), sum(verdicts)
    latest = scores[-1]
    return TaskComponentStats(
        component=component,
        n=len(scores),
        evaluated=n,
        passes=c,
        mean_value=sum(values) / len(values) if values else None,
        pass_rate=c / n if n else None,
        pass_at_k={k: pass_at_k(n, c, k) for k in range(1, n + 1)},
        pass_hat_k={k: pass_hat_k(n, c, k) for k in range(1, n + 1)},
        flip=0 < c < n,
        scorer=latest.scorer,
        scorer_version=latest.version,
    )


def _agreement(runs: Sequence[RunRecord], verdicts: Sequence[Verdict]) -> list[Agreement]:
    scorer_of = {(r.run_id, s.component): s.scorer for r in runs for s in r.components}
    tally: dict[str, list[bool]] = defaultdict(list)
    for verdict in verdicts:
        name = scorer_of.get((verdict.run_id, verdict.component), verdict.component)
        tally[name].append(verdict.agree)
    return [
        Agreement(scorer=name, n=len(marks), agree=sum(marks), rate=sum(marks) / len(marks))
        for name, marks in sorted(tally.items())
    ]


def build_scorecard(
    suite: Suite,
    experiment: Mapping[str, Any],
    runs: Sequence[RunRecord | Mapping[str, Any]],
    verdicts: Sequence[Verdict | Mapping[str, Any]] = (),
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Scorecard:
    """Aggregate scored runs of one experiment on `suite` into a scorecard."""
    records = [r if isinstance(r, RunRecord) else RunRecord.model_validate(r) for r in runs]
    judged = [v if isinstance(v, Verdict) else Verdict.model_validate(v) for v in verdicts]
    known = {task.id for task in suite.tasks}
    strangers = sorted({r.task_id for r in records} - known)
    if strangers:
        raise ValueError(f"runs name tasks that are not in suite {suite.name!r}: {strangers}")
    by_task: dict[str, dict[str, list[ComponentScore]]] = defaultdict(lambda: defaultdict(list))
    runs_per_task: Counter[str] = Counter()
    for record in sorted(records, key=lambda r: (r.task_id, r.trial, r.run_id)):
        runs_per_task[record.task_id] += 1
        for score in record.components:
            by_task[record.task_id][score.component].append(score)
    names = _ordered(c for scores in by_task.values() for c in scores)
    tasks = [
        TaskCard(
            task_id=task.id,
            metadata=task.metadata,
            runs=runs_per_task[task.id],
            components=[
                _task_stats(name, by_task[task.id][name])
                for name in names
                if by_task[task.id].get(name)
            ],
        )
        for task in suite.tasks
    ]
    summaries = []
    for name in names:
        stats = [s for t in tasks if (s := t.component(name)) is not None]
        means = [s.mean_value for s in stats if s.mean_value is not None]
        rates = [s.pass_rate for s in stats if s.pass_rate is not None]
        interval = bootstrap_mean(means, resamples=resamples, seed=seed)
        # one task gives a zero-width "interval" that looks certain: below 2 it is not available
        spread = interval is not None and interval.n >= MIN_INTERVAL_TASKS
        passes = [
            [sc.passed for sc in by_task[t.task_id][name] if sc.passed is not None] for t in tasks
        ]
        summaries.append(
            ComponentSummary(
                component=name,
                mean=interval.mean if interval else None,
                low=interval.low if interval and spread else None,
                high=interval.high if interval and spread else None,
                n_tasks=len(means),
                pass_rate=sum(rates) / len(rates) if rates else None,
                flip_rate=flip_rate([[bool(p) for p in row] for row in passes]),
            )
        )
    flags = Counter(flag for r in records for flag in r.flags)
    return Scorecard(
        suite=SuiteRef(name=suite.name, version=suite_version(suite)),
        experiment=ExperimentRef(
            id=str(experiment["id"]), config=dict(experiment.get("config") or {})
        ),
        bootstrap={"resamples": resamples, "seed": seed, "confidence": 0.95},
        components=summaries,
        tasks=tasks,
        flags=dict(sorted(flags.items())),
        agreement=_agreement(records, judged),
        runs=records,
    )


@dataclass(frozen=True)
class GateResult:
    """Whether a scorecard meets its thresholds, and which did not."""

    passed: bool
    failures: list[str] = field(default_factory=list)


def gate(scorecard: Scorecard, thresholds: Mapping[str, float]) -> GateResult:
    """Each component's mean must reach its threshold; an unevaluated component fails."""
    failures = []
    for component, minimum in thresholds.items():
        summary = scorecard.summary(component)
        if summary is None or summary.mean is None:
            failures.append(f"{component}: not evaluated (threshold {minimum})")
        elif summary.mean < minimum:
            failures.append(f"{component}: mean {summary.mean:.3f} < {minimum}")
    return GateResult(passed=not failures, failures=failures)
