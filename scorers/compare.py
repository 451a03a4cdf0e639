"""Paired comparison of two experiments on one suite (B relative to A)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .repeats import DEFAULT_RESAMPLES, DEFAULT_SEED, Interval, bootstrap_mean
from .scorecard import Scorecard

__all__ = ["Comparison", "ComparisonError", "TaskComparison", "compare_experiments"]

TaskClass = Literal[
    "both_pass", "both_fail", "improved", "regressed", "missing", "not_evaluated"
]
# Display order: what a person comparing last night with last week must see first.
CLASS_ORDER: tuple[TaskClass, ...] = (
    "regressed",
    "improved",
    "missing",
    "both_fail",
    "both_pass",
    "not_evaluated",
)
VerdictText = Literal["A better", "B better", "undecided"]


class ComparisonError(ValueError):
    """Two scorecards that cannot be compared (different suites or suite versions)."""


@dataclass(frozen=True)
class TaskComparison:
    """One task: per-task pass rates in A and B, difference B - A, and its class."""

    task_id: str
    a: float | None
    b: float | None
    difference: float | None
    cls: TaskClass


@dataclass(frozen=True)
class Comparison:
    """Per-task classes, the paired interval of mean(B - A) and the verdict."""

    component: str
    a_id: str
    b_id: str
    tasks: list[TaskComparison]
    interval: Interval | None
    verdict: VerdictText
    reason: str

    def counts(self) -> dict[str, int]:
        """How many tasks fall in each class."""
        return {name: sum(1 for t in self.tasks if t.cls == name) for name in CLASS_ORDER}


def _classify(a: float | None, b: float | None, in_both: bool) -> TaskClass:
    if a is None and b is None and in_both:
        return "not_evaluated"  # the component has no expectation for this task
    if a is None or b is None:
        return "missing"
    if b > a:
        return "improved"
    if b < a:
        return "regressed"
    # Equal rates: a task passing in most trials of both counts as passing in both.
    return "both_pass" if a >= 0.5 else "both_fail"


def _display_order(row: TaskComparison) -> tuple[int, float, str]:
    # The one order every reader shows: by class (CLASS_ORDER), the largest regression first
    # within a class, then by task id.
    return (CLASS_ORDER.index(row.cls), row.difference or 0.0, row.task_id)


def compare_experiments(
    a: Scorecard,
    b: Scorecard,
    component: str = "outcome",
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    min_tasks: int = 5,
) -> Comparison:
    """Compare B against A on `component`; "improved" means B passes more often than A.

    Tasks come in display order: regressions first (largest first), then improvements, missing,
    both-fail, both-pass and not-evaluated tasks, each class by task id after the difference."""
    if a.suite.name != b.suite.name or a.suite.version != b.suite.version:
        raise ComparisonError(
            f"experiments ran different suites: A {a.suite.name}@{a.suite.version[:12]}, "
            f"B {b.suite.name}@{b.suite.version[:12]}; compare runs of one suite version"
        )
    rates_b = {}
    for task in b.tasks:
        stats = task.component(component)
        rates_b[task.task_id] = stats.pass_rate if stats else None
    rows = []
    for task in a.tasks:
        stats = task.component(component)
        rate_a = stats.pass_rate if stats else None
        rate_b = rates_b.get(task.task_id)
        diff = rate_b - rate_a if rate_a is not None and rate_b is not None else None
        in_both = task.task_id in rates_b
        cls = _classify(rate_a, rate_b, in_both)
        rows.append(TaskComparison(task.task_id, rate_a, rate_b, diff, cls))
    only_b = sorted(set(rates_b) - {task.task_id for task in a.tasks})
    rows.extend(TaskComparison(t, None, rates_b[t], None, "missing") for t in only_b)
    rows.sort(key=_display_order)
    differences = [r.difference for r in rows if r.difference is not None]
    interval = bootstrap_mean(differences, resamples=resamples, seed=seed)
    verdict: VerdictText = "undecided"
    if interval is None or interval.n < min_tasks:
        # A bootstrap over a handful of tasks is overconfident: refuse to decide.
        reason = f"{len(differences)} paired task(s); at least {min_tasks} are needed to decide"
    elif interval.low > 0:
        verdict, reason = "B better", "the interval of mean(B - A) lies above 0"
    elif interval.high < 0:
        verdict, reason = "A better", "the interval of mean(B - A) lies below 0"
    else:
        reason = "the interval of mean(B - A) contains 0"
    return Comparison(component, a.experiment.id, b.experiment.id, rows, interval, verdict, reason)
