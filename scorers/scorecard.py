"""Scorecards: per task x component the named statistics (`scorers.statistics`), per experiment
their means over tasks with intervals, flags and agreement."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from .infra import Infrastructure
from .registry import component_key
from .repeats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    bootstrap_means,
    pass_at_k,
    pass_hat_k,
)
from .robustness import Robustness
from .statistics import StatisticName
from .suite import Suite, suite_version
from .types import ComponentScore
from .verdict import run_verdict, scores_verdict

__all__ = [
    "SCORECARD_SCHEMA_VERSION",
    "Agreement",
    "ComponentSummary",
    "ExperimentRef",
    "RunRecord",
    "Scorecard",
    "Statistic",
    "SuiteRef",
    "TaskCard",
    "TaskComponentStats",
    "Verdict",
    "build_scorecard",
]

# 2: the named statistics: a task's `mean` (was `mean_value`); per component `pass_rate`, `mean`,
# `pass_at_k`, `pass_hat_k` and `flip` each as {value, low, high, n_tasks} (were flat `mean`,
# `low`, `high`, `pass_rate`, `flip_rate`); runs carry calls, tokens and the first failure
# 3: optional `robustness` (replay, faults, with faults vs without) and `infra`; a run's `attempt`
# at its cell. A version-2 reader refuses a document with them (unknown keys are forbidden)
SCORECARD_SCHEMA_VERSION = 3


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
    calls: int | None = None  # the agent's tool calls (efficiency's count), when scored
    input_tokens: int | None = None  # over its model turns, when it had any
    output_tokens: int | None = None
    # which attempt at its cell (task, trial) this is, when the durable jobs ran it: the
    # scorecard uses each cell's latest completed attempt (None: a run made otherwise)
    attempt: int | None = None

    def first_failure(self) -> str | None:
        """`component: reason` of the first component that failed (in component order), for CI
        output: the words the runs list and the trace page show (`tracecard.scorers.verdict`)."""
        verdict = scores_verdict(self.components)
        return f"{verdict.component}: {verdict.reason}" if verdict.word == "failed" else None

    @property
    def verdict(self) -> str:
        """passed, failed, not_evaluated, errored (or pending, running: live):
        `scorers.verdict.run_verdict`."""
        return run_verdict(self.status, self.components).word


class Verdict(_Model):
    """A person's judgement of one component score of one run."""

    run_id: str
    component: str
    agree: bool
    note: str = ""
    author: str = ""


class TaskComponentStats(_Model):
    """The named statistics of one component on one task, over its trials."""

    component: str
    n: int  # runs with a score for this component
    evaluated: int  # of which have a pass/fail
    passes: int
    pass_rate: float | None  # passes / evaluated: the headline
    mean: float | None  # mean of the non-null values (partial credit)
    pass_at_k: dict[int, float]  # pass@k for k = 1..evaluated
    pass_hat_k: dict[int, float]  # pass^k for k = 1..evaluated
    flip: bool  # both passes and fails among the trials
    scorer: str
    scorer_version: str

    def statistic(self, name: StatisticName) -> float | None:
        """The value of a named statistic (flip as 1.0 / 0.0); None when not available."""
        if name.name == "pass@k":
            return self.pass_at_k.get(name.k or 0)
        if name.name == "pass^k":
            return self.pass_hat_k.get(name.k or 0)
        if name.name == "flip":
            return float(self.flip) if self.evaluated else None
        value: float | None = getattr(self, name.name)
        return value


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


class Statistic(_Model):
    """A statistic's mean over tasks with its 95% bootstrap interval over tasks (`low`, `high`:
    null when fewer than `MIN_INTERVAL_TASKS` tasks have it)."""

    value: float | None
    low: float | None
    high: float | None
    n_tasks: int  # tasks that have the statistic


class ComponentSummary(_Model):
    """Per experiment x component: each named statistic's mean over tasks, with its interval.
    `pass_at_k`/`pass_hat_k` have k = 1..the fewest evaluated trials of a task."""

    component: str
    n_tasks: int  # tasks with a value or a pass/fail for this component
    pass_rate: Statistic
    mean: Statistic
    pass_at_k: dict[int, Statistic]
    pass_hat_k: dict[int, Statistic]
    flip: Statistic  # the share of tasks whose trials both pass and fail

    def statistic(self, name: StatisticName) -> Statistic | None:
        """A named statistic; None when no task has it (e.g. pass^5 with 3 trials)."""
        if name.name == "pass@k":
            return self.pass_at_k.get(name.k or 0)
        if name.name == "pass^k":
            return self.pass_hat_k.get(name.k or 0)
        found: Statistic = getattr(self, name.name)
        return found


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
    # replay and faults (docs/replay.md, "Robustness"): only when the experiment had them
    robustness: Robustness | None = None
    # attempts lost to the infrastructure: only when there were some
    infra: Infrastructure | None = None

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
        pass_rate=c / n if n else None,
        mean=sum(values) / len(values) if values else None,
        pass_at_k={k: pass_at_k(n, c, k) for k in range(1, n + 1)},
        pass_hat_k={k: pass_hat_k(n, c, k) for k in range(1, n + 1)},
        flip=0 < c < n,
        scorer=latest.scorer,
        scorer_version=latest.version,
    )


def _statistic(interval: Interval | None) -> Statistic:
    if interval is None:
        return Statistic(value=None, low=None, high=None, n_tasks=0)
    # one task gives a zero-width "interval" that looks certain: below 2 it is not available
    spread = interval.n >= MIN_INTERVAL_TASKS
    return Statistic(
        value=interval.mean,
        low=interval.low if spread else None,
        high=interval.high if spread else None,
        n_tasks=interval.n,
    )


class _Draws:
    """Columns to bootstrap, grouped by the tasks they are over: one set of resampled tasks per
    group (`bootstrap_means`), so components over the same tasks share one draw. The intervals
    are those `bootstrap_mean` gives each column alone with the same seed."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, ...], list[list[float]]] = {}
        self.results: dict[tuple[str, ...], list[Interval | None]] = {}

    def add(self, tasks: tuple[str, ...], column: list[float]) -> tuple[tuple[str, ...], int]:
        columns = self.groups.setdefault(tasks, [])
        columns.append(column)
        return tasks, len(columns) - 1

    def run(self, resamples: int, seed: int) -> None:
        for tasks, columns in self.groups.items():
            self.results[tasks] = bootstrap_means(columns, resamples=resamples, seed=seed)

    def get(self, slot: tuple[tuple[str, ...], int]) -> Statistic:
        return _statistic(self.results[slot[0]][slot[1]])


def _summaries(
    names: Sequence[str], tasks: Sequence[TaskCard], resamples: int, seed: int
) -> list[ComponentSummary]:
    """Per component each statistic's mean over the tasks that have it: the pass-based ones over
    the tasks with a pass/fail, the mean over those with a value."""
    draws = _Draws()
    plans = []
    for name in names:
        stats = [(t.task_id, s) for t in tasks if (s := t.component(name)) is not None]
        judged = [(t, s) for t, s in stats if s.evaluated]
        valued = [(t, s) for t, s in stats if s.mean is not None]
        on_judged = tuple(t for t, _ in judged)
        k_max = min((s.evaluated for _, s in judged), default=0)
        ks = range(2, k_max + 1)  # pass@1 = pass^1 = pass_rate
        slots = {
            "rate": draws.add(on_judged, [s.pass_rate or 0.0 for _, s in judged]),
            "flip": draws.add(on_judged, [float(s.flip) for _, s in judged]),
            "mean": draws.add(tuple(t for t, _ in valued), [s.mean or 0.0 for _, s in valued]),
        }
        at = {k: draws.add(on_judged, [s.pass_at_k[k] for _, s in judged]) for k in ks}
        hat = {k: draws.add(on_judged, [s.pass_hat_k[k] for _, s in judged]) for k in ks}
        plans.append((name, stats, judged, slots, at, hat))
    draws.run(resamples, seed)
    summaries = []
    for name, stats, judged, slots, at, hat in plans:
        rate = draws.get(slots["rate"])
        summaries.append(
            ComponentSummary(
                component=name,
                n_tasks=sum(1 for _, s in stats if s.evaluated or s.mean is not None),
                pass_rate=rate,
                mean=draws.get(slots["mean"]),
                pass_at_k={1: rate} | {k: draws.get(v) for k, v in at.items()} if judged else {},
                pass_hat_k={1: rate} | {k: draws.get(v) for k, v in hat.items()} if judged else {},
                flip=draws.get(slots["flip"]),
            )
        )
    return summaries


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
    infra: Infrastructure | None = None,
) -> Scorecard:
    """Aggregate scored runs of one experiment on `suite` into a scorecard (`infra`: what the
    infrastructure lost, counted apart)."""
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
    summaries = _summaries(names, tasks, resamples, seed)
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
        infra=infra,
    )
