"""Attempts at a cell, on the server: begin one (a lost earlier attempt is closed as
`worker_lost` and a new run made for the cell), the environment its run needs, the cells'
states. Synchronous functions on the store; the API (`tracecard.server.jobs.api`) runs them on a
worker thread.

An attempt whose agent a worker started and never finished is never scored: its run is closed
`errored` with end reason `worker_lost` without probes or scorers, and the cell's next attempt
is a new run (the scorecard reads the latest completed attempt of each cell).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from tracecard.server.errors import RunError
from tracecard.server.settings import Settings
from tracecard.traces import infra_failures, queries
from tracecard.traces.experiments import INFRA_REASONS
from tracecard.traces.models import ExperimentRow, JobAttemptRow, RunRow
from tracecard.traces.store import Store

__all__ = [
    "INFRA_REASONS",
    "BegunAttempt",
    "begin_attempt",
    "close_lost",
    "end_cancelled",
]

FINAL = ("finished", "errored", "timed_out", "aborted")


@dataclass(frozen=True)
class BegunAttempt:
    """The run an agent is to be started on, its attempt number, and attempts closed as lost."""

    run: RunRow
    attempt: int
    lost: list[str]


def _attempts(store: Store, experiment_id: str, task_id: str, trial: int) -> list[JobAttemptRow]:
    query = (
        select(JobAttemptRow)
        .where(
            col(JobAttemptRow.experiment_id) == experiment_id,
            col(JobAttemptRow.task_id) == task_id,
            col(JobAttemptRow.trial) == trial,
        )
        .order_by(col(JobAttemptRow.attempt))
    )
    with store.session() as session:
        return list(session.scalars(query))


def close_lost(store: Store, run_id: str, why: str) -> RunRow | None:
    """Close an attempt whose worker is gone: the run `errored`, no scores, end reason
    `worker_lost`, or the failure its worker recorded before it went (a per-run upstream that
    never started doomed the run already: `sandbox_failed`, `upstream_never_started`); a run
    that already ended (its finish got through) is left as it is."""
    now = datetime.now(UTC)
    with store.writing() as session:
        attempt = session.get(JobAttemptRow, run_id)
        if attempt is not None and attempt.state == "running":
            attempt.state, attempt.reason, attempt.ended_at = "lost", why, now
            session.add(attempt)
    failed = infra_failures.of_run(store, run_id)
    if failed is not None:
        reason, first = failed
        return _end_unscored(store, run_id, "errored", reason, f"{first}; then {why}")
    return _end_unscored(store, run_id, "errored", "worker_lost", why)


def end_cancelled(store: Store, run_id: str) -> RunRow | None:
    """A run whose cell was cancelled (`tracecard experiment cancel`): `aborted`, end reason
    `cancelled`, without probes or scores; a run that already ended is left as it is."""
    return _end_unscored(store, run_id, "aborted", "cancelled", "tracecard experiment cancel")


def _end_unscored(store: Store, run_id: str, status: str, reason: str, why: str) -> RunRow | None:
    run = store.get_run(run_id)
    if run is None or run.status in FINAL:
        return run
    return store.update_run(
        run_id,
        status=status,
        error=f"{reason}: {why}",
        end_reason=reason,
        finished_at=datetime.now(UTC),
    )


def _new_attempt_run(store: Store, settings: Settings, lost: RunRow) -> RunRow:
    from tracecard.server.evaluation.service import new_task_run

    row = new_task_run(
        store,
        settings,
        suite_ref=None,
        task_id=lost.task_id,
        experiment_id=lost.experiment_id,
        config={},
        trial=lost.trial,
    )
    store.add_run(row)
    return row


def begin_attempt(
    store: Store, settings: Settings, run_id: str, executor: str, host: str | None
) -> BegunAttempt:
    """Start an attempt on `run_id`. When that run's attempt was already begun (by a worker
    that is gone, since the job step runs again only when it never completed), that attempt is
    closed as lost and the cell gets a new run, which is begun instead."""
    run = store.get_run(run_id)
    if run is None or run.experiment_id is None or run.task_id is None:
        raise RunError(f"no experiment run with id {run_id!r}", 404)
    lost: list[str] = []
    while True:
        attempts = _attempts(store, run.experiment_id, run.task_id, run.trial)
        number = len(attempts) + 1
        try:
            with store.writing() as session:
                session.add(
                    JobAttemptRow(
                        run_id=run.id,
                        experiment_id=run.experiment_id,
                        task_id=run.task_id,
                        trial=run.trial,
                        attempt=number,
                        executor=executor,
                        host=host,
                    )
                )
            return BegunAttempt(run=run, attempt=number, lost=lost)
        except IntegrityError:  # begun before: that attempt's worker never finished it
            pass
        earlier = next((a for a in attempts if a.run_id == run.id), None)
        who = f"{earlier.executor} on {earlier.host}" if earlier else "an earlier worker"
        close_lost(store, run.id, f"the worker ({who}) stopped before this attempt ended")
        lost.append(run.id)
        run = _new_attempt_run(store, settings, run)


def new_cell_run(store: Store, settings: Settings, run_id: str) -> RunRow:
    """A new run for the cell of `run_id` (a rerun's attempt); the old run is kept."""
    run = store.get_run(run_id)
    if run is None or run.experiment_id is None:
        raise RunError(f"no experiment run with id {run_id!r}", 404)
    return _new_attempt_run(store, settings, run)


def experiment_row(store: Store, experiment_id: str) -> ExperimentRow:
    """The experiment, or a 404 naming it."""
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise RunError(f"no experiment with id {experiment_id!r}", 404)
    return experiment
