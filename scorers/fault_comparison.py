"""With faults vs without, as the scorecard's robustness section reports it: `compare`'s paired
comparison (`scorers.compare.compare_experiments`, the one that can answer "undecided"), with the
experiment that ran without faults as A, so the interval, verdict and reason are those that
`tracecard compare WITHOUT WITH` prints. Pure: two scorecards in, one `FaultComparison` out."""

from __future__ import annotations

from .compare import compare_experiments
from .robustness import FaultComparison, PairedInterval, PairedTask
from .scorecard import Scorecard
from .statistics import StatisticName

__all__ = ["fault_comparison"]


def _figure(card: Scorecard, component: str, name: StatisticName) -> float | None:
    summary = card.summary(component)
    found = summary.statistic(name) if summary is not None else None
    return found.value if found is not None else None


def fault_comparison(
    without: Scorecard, with_faults: Scorecard, chosen_by: str, component: str = "outcome"
) -> FaultComparison:
    """`with_faults` (B) against `without` (A) on `component`; `ComparisonError` when they ran
    different suite versions."""
    result = compare_experiments(without, with_faults, component)
    summaries = [card.summary(component) for card in (without, with_faults)]
    shared = set.intersection(*(set(s.pass_hat_k) if s else set() for s in summaries))
    k = max(shared, default=None)
    interval = result.interval
    return FaultComparison(
        a=result.a_id,
        b=result.b_id,
        chosen_by=chosen_by,
        component=component,
        verdict=result.verdict,
        reason=result.reason,
        interval=None
        if interval is None
        else PairedInterval(mean=interval.mean, low=interval.low, high=interval.high, n=interval.n),
        counts=result.counts(),
        pass_rate={
            side: _figure(card, component, StatisticName("pass_rate"))
            for side, card in (("a", without), ("b", with_faults))
        },
        k=k,
        pass_hat_k={
            side: _figure(card, component, StatisticName("pass^k", k)) if k else None
            for side, card in (("a", without), ("b", with_faults))
        },
        tasks=[
            PairedTask(task_id=t.task_id, a=t.a, b=t.b, difference=t.difference, cls=t.cls)
            for t in result.tasks
        ],
    )
