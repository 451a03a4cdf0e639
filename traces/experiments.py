"""An experiment's stored rows, read together: what its scorecard is built from.

The scorecard itself is built by `tracecard.scorers.stored` (pure); this module only reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SuiteRow, VerdictRow
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

# Why a run ended that is the infrastructure's fault, not the agent's (`runs.end_reason`): set by
# the durable jobs (tracecard.server.jobs); such a run is never scored as the agent's.
INFRA_REASONS = ("worker_lost", "sandbox_failed", "upstream_never_started")
_FINAL = ("finished", "errored", "timed_out", "aborted")


@dataclass(frozen=True)
class StoredExperiment:
    """An experiment, its suite document (None when no longer stored), its runs of a task by
    task and trial, and their scores and people's verdicts by run id."""

    experiment: ExperimentRow
    suite: SuiteRow | None
    runs: list[RunRow]
    scores: dict[str, list[ScoreRow]]
    verdicts: dict[str, list[VerdictRow]]
    # the durable jobs' attempt number of each run they began (`job_attempts`), by run id
    attempts: dict[str, int] = field(default_factory=dict)
    # attempts lost to the infrastructure (`INFRA_REASONS`): left out of `runs`, counted apart
    infra: list[RunRow] = field(default_factory=list)


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


def superseded(runs: list[RunRow], later: set[str] | None = None) -> set[str]:
    """Runs the scorecard leaves out: any attempt lost to the infrastructure, and, in a cell
    (task, trial) that the jobs attempted again (a run in `later`), every attempt but its latest
    completed one (a rerun replaces what it reruns). Runs made otherwise all count."""
    by_cell: dict[tuple[str | None, int], list[RunRow]] = {}
    for run in runs:
        by_cell.setdefault((run.task_id, run.trial), []).append(run)
    out: set[str] = set()
    for cell in by_cell.values():
        out.update(r.id for r in cell if r.end_reason in INFRA_REASONS)
        kept = sorted((r for r in cell if r.end_reason not in INFRA_REASONS), key=_created)
        if len(kept) > 1 and any(r.id in (later or set()) for r in kept):
            latest = ([r for r in kept if r.status in _FINAL] or kept)[-1]
            out.update(r.id for r in kept if r.id != latest.id)
    return out


def _created(run: RunRow) -> datetime:
    return run.created_at
