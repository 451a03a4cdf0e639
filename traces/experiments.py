"""An experiment's stored rows, read together: what its scorecard is built from.

The scorecard itself is built by `tracecard.scorers.stored` (pure); this module only reads.
`tracecard.traces.sqlite_read` reads the same rows from a SQLite file without SQLAlchemy; what
both return, and which runs a scorecard leaves out, is `tracecard.traces.experiment_rows`.
"""

from __future__ import annotations

from tracecard.traces import queries
from tracecard.traces.experiment_rows import INFRA_REASONS, StoredExperiment, superseded
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store
from tracecard.traces.verdicts import verdicts_for_runs

__all__ = [
    "INFRA_REASONS",
    "StoredExperiment",
    "attempt_numbers",
    "reattempts",
    "stored_experiment",
    "superseded",
]


def stored_experiment(store: Store, experiment: ExperimentRow) -> StoredExperiment:
    """Everything the experiment's scorecard needs, in four queries."""
    every = [r for r in queries.experiment_runs(store, experiment.id) if r.task_id]
    numbers = attempt_numbers(store, experiment.id)
    # earlier attempts of a cell, and attempts lost to the infrastructure
    replaced = superseded(every, {run for run, number in numbers.items() if number > 1})
    runs = [r for r in every if r.id not in replaced]
    ids = [r.id for r in runs]
    return StoredExperiment(
        experiment=experiment,
        suite=queries.get_suite(store, experiment.suite_version),
        runs=runs,
        scores=store.scores_for_runs(ids),
        verdicts=dict(verdicts_for_runs(store, ids)),
        attempts=numbers,
        infra=[r for r in every if r.end_reason in INFRA_REASONS],
    )


def attempt_numbers(store: Store, experiment_id: str) -> dict[str, int]:
    """Run id -> its attempt at its cell, for the runs the durable jobs began (`job_attempts`)."""
    from sqlmodel import col, select

    from tracecard.traces.models import JobAttemptRow

    rows = JobAttemptRow
    query = select(rows.run_id, rows.attempt).where(col(rows.experiment_id) == experiment_id)
    with store.session() as session:
        return {run_id: number for run_id, number in session.execute(query)}


def reattempts(store: Store, experiment_id: str) -> set[str]:
    """Runs the durable jobs made as a cell's second or later attempt (`job_attempts`)."""
    return {run for run, number in attempt_numbers(store, experiment_id).items() if number > 1}
