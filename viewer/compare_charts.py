"""The compare-experiments page's charts: the headline component's `pass_rate` per task for A
and B, and the experiment-level `pass_rate` of the experiments run on the same suite version
(A and B among them), oldest first. The values are the scorecards' (`scorers`); this module
only picks which and draws them (`viewer.charts`)."""

from __future__ import annotations

from typing import Final

from markupsafe import Markup

from tracecard.scorers.scorecard import Scorecard
from tracecard.scorers.stored import scorecard_of
from tracecard.traces.experiments import stored_experiment
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store
from tracecard.viewer.charts import Series, rate_bars
from tracecard.viewer.experiment_compare import ExperimentsComparison

HISTORY: Final = 8  # experiments in the "over experiments" chart (each one builds a scorecard)


def values_card(store: Store, experiment: ExperimentRow) -> Scorecard:
    """The experiment's scorecard without bootstrap intervals (`resamples=0`: each interval is
    its value): the comparison reads per-task pass rates, flags and values, never an interval,
    and 2,000 resamples per statistic cost ~0.5 s per experiment."""
    return scorecard_of(stored_experiment(store, experiment), resamples=0)


def per_task_chart(
    view: ExperimentsComparison, side_a: ExperimentRow, side_b: ExperimentRow
) -> Markup:
    """The headline component's pass_rate per task, one bar for A and one for B, in the
    table's order (regressions first)."""
    column = view.components.index(view.headline.component)
    cells = [t.cells[column] for t in view.tasks]
    return rate_bars(
        f"{view.headline.component} pass_rate per task, A and B",
        [t.task_id for t in view.tasks],
        [
            Series(f"A {side_a.config_name}", "side-a", [c.a if c else None for c in cells]),
            Series(f"B {side_b.config_name}", "side-b", [c.b if c else None for c in cells]),
        ],
    )


def history_chart(
    store: Store,
    experiments: list[ExperimentRow],
    cards: dict[str, Scorecard],
    component: str,
) -> Markup | None:
    """The experiment-level pass_rate of `component` (the scorecard's mean over tasks of the
    per-task pass_rate) for the newest `HISTORY` experiments on A's and B's suite version, A
    and B always among them, oldest first; None when there is nothing besides A and B."""
    version = next(e.suite_version for e in experiments if e.id in cards)
    same = [e for e in experiments if e.suite_version == version]  # newest first
    chosen = [e for e in same if e.id in cards]
    others = [e for e in same if e.id not in cards][: max(0, HISTORY - len(chosen))]
    if not others:
        return None
    shown = sorted(chosen + others, key=lambda e: (e.created_at, e.id))
    sides = dict(zip(cards, ("A", "B"), strict=True))
    labels, values = [], []
    for experiment in shown:
        card = cards.get(experiment.id) or values_card(store, experiment)
        summary = card.summary(component)
        values.append(summary.pass_rate.value if summary else None)
        mark = f" ({sides[experiment.id]})" if experiment.id in sides else ""
        labels.append(f"{experiment.config_name} {experiment.created_at:%m-%d %H:%M}{mark}")
    return rate_bars(
        f"{component} pass_rate over experiments on this suite version, oldest first",
        labels,
        [Series("pass_rate", "side-b", values)],
    )
