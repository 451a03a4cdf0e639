"""An experiment's stored rows, read together: what its scorecard is built from.

The scorecard itself is built by `tracecard.scorers.stored` (pure); this module only reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SuiteRow, VerdictRow
from tracecard.traces.store import Store
from tracecard.traces.verdicts import verdicts_for_runs

__all__ = ["StoredExperiment", "stored_experiment"]


@dataclass(frozen=True)
class StoredExperiment:
    """An experiment, its suite document (None when no longer stored), its runs of a task by
    task and trial, and their scores and people's verdicts by run id."""

    experiment: ExperimentRow
    suite: SuiteRow | None
    runs: list[RunRow]
    scores: dict[str, list[ScoreRow]]
    verdicts: dict[str, list[VerdictRow]]


def stored_experiment(store: Store, experiment: ExperimentRow) -> StoredExperiment:
    """Everything the experiment's scorecard needs, in four queries."""
    runs = [r for r in queries.experiment_runs(store, experiment.id) if r.task_id]
    ids = [r.id for r in runs]
    return StoredExperiment(
        experiment=experiment,
        suite=queries.get_suite(store, experiment.suite_version),
        runs=runs,
        scores=store.scores_for_runs(ids),
        verdicts=dict(verdicts_for_runs(store, ids)),
    )
