"""An experiment's cells (task x trial) as durable jobs: their states, every attempt, and the
workers seen lately. Read-only queries on tracecard's tables (runs, job_attempts, job_workers),
shared by the API (`GET /api/experiments/{id}/cells`), `tracecard run --queue` and the page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlmodel import col, select

from tracecard.traces import infra_failures, queries
from tracecard.traces.db_clock import database_now
from tracecard.traces.experiments import INFRA_REASONS, reattempts, superseded
from tracecard.traces.models import JobAttemptRow, JobWorkerRow, RunRow
from tracecard.traces.store import Store

__all__ = [
    "CELL_STATES",
    "cell_attempts",
    "cell_state",
    "experiment_cells",
    "queued_cells",
    "workers",
]

FINAL = ("finished", "errored", "timed_out", "aborted")


# done: ended on its own; failed: the agent errored or timed out; infra: the last attempt was
# lost to the infrastructure (counted apart, never the agent's); queued: no attempt running.
CELL_STATES = ("done", "running", "failed", "infra", "cancelled", "queued")
WORKER_SEEN_S = 24 * 3600.0  # workers whose heartbeat is older than this are not listed


def cell_state(run: RunRow) -> str:
    """The state of a cell, from the run of its latest attempt."""
    if run.end_reason in INFRA_REASONS:
        return "infra"
    if run.status == "finished":
        return "done"
    if run.status in ("errored", "timed_out"):
        return "failed"
    if run.status == "aborted":
        return "cancelled"
    if run.status == "running":
        return "running"
    return "queued"


def workers(store: Store, now: datetime | None = None) -> list[dict[str, Any]]:
    """Workers by last heartbeat, newest first, with how long ago it was."""
    with store.session() as session:
        now = now or database_now(session)  # the clock the heartbeats are stamped with
        rows = list(
            session.scalars(select(JobWorkerRow).order_by(col(JobWorkerRow.heartbeat_at).desc()))
        )
    found = []
    for row in rows:
        beat = row.heartbeat_at if row.heartbeat_at.tzinfo else row.heartbeat_at.replace(tzinfo=UTC)
        age = (now - beat).total_seconds()
        if age > WORKER_SEEN_S:
            continue
        found.append(
            {
                "id": row.id,
                "host": row.host,
                "pid": row.pid,
                "tags": row.tags,
                "concurrency": row.concurrency,
                "running": row.running if row.stopped_at is None else 0,
                "heartbeat_age_s": round(age, 1),
                "stopped": row.stopped_at is not None,
                "recovered_by": row.recovered_by,
            }
        )
    return found


def experiment_cells(store: Store, experiment_id: str) -> dict[str, Any]:
    """Every cell of the experiment: its state, its latest run, its attempts; counts by state;
    the workers."""
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise LookupError(f"no experiment with id {experiment_id!r}")
    runs = [r for r in queries.experiment_runs(store, experiment_id) if r.task_id]
    attempts = cell_attempts(store, experiment_id)
    replaced = superseded(runs, reattempts(store, experiment_id))
    latest: dict[tuple[str, int], RunRow] = {}
    for run in sorted(runs, key=lambda r: r.created_at):
        key = (run.task_id or "", run.trial)
        if key not in latest or run.id not in replaced or latest[key].id in replaced:
            latest[key] = run
    counts = dict.fromkeys(CELL_STATES, 0)
    cells = []
    for (task_id, trial), run in sorted(latest.items()):
        tried = attempts.get((task_id, trial), [])
        state = cell_state(run)
        if state == "queued" and any(a["run_id"] == run.id for a in tried):
            state = "running"  # its agent was started; the proxy has not seen a call yet
        counts[state] += 1
        cells.append(
            {
                "task_id": task_id,
                "trial": trial,
                "state": state,
                "run_id": run.id,
                "status": run.status,
                "end_reason": run.end_reason,
                "attempts": tried,
            }
        )
    lost = sum(1 for tried in attempts.values() for a in tried if a["state"] == "lost")
    return {
        "experiment_id": experiment.id,
        "cells": cells,
        "counts": counts,
        "total": len(cells),
        "lost_attempts": lost,
        "workers": workers(store),
    }


def cell_attempts(store: Store, experiment_id: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Every attempt of every cell of an experiment, oldest first, with its run's status."""
    runs = {r.id: r for r in queries.experiment_runs(store, experiment_id)}
    query = select(JobAttemptRow).where(col(JobAttemptRow.experiment_id) == experiment_id)
    with store.session() as session:
        rows = list(session.scalars(query.order_by(col(JobAttemptRow.attempt))))
    # a per-run upstream that never started, seen here while the attempt still runs
    failed = infra_failures.of_runs(store, [row.run_id for row in rows])
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        run = runs.get(row.run_id)
        infra = failed.get(row.run_id)
        cells.setdefault((row.task_id, row.trial), []).append(
            {
                "run_id": row.run_id,
                "attempt": row.attempt,
                "executor": row.executor,
                "host": row.host,
                "state": "ended"
                if row.state == "running" and run and run.status in FINAL
                else row.state,
                "reason": row.reason,
                "status": run.status if run else None,
                "end_reason": run.end_reason if run else None,
                "infra": {"reason": infra[0], "why": infra[1]} if infra else None,
                "started_at": row.started_at.isoformat(),
            }
        )
    return cells


def queued_cells(store: Store, experiment_id: str) -> dict[str, Any] | None:
    """The cells for the experiment page when its cells ran as jobs on workers, or some are
    left or were lost; None otherwise (an experiment `tracecard run` finished on one machine,
    or one whose runs were made through the API, needs no such section)."""
    with store.session() as session:
        executors = set(
            session.scalars(
                select(JobAttemptRow.executor)
                .where(col(JobAttemptRow.experiment_id) == experiment_id)
                .distinct()
            )
        )
    if not executors:
        return None
    cells = experiment_cells(store, experiment_id)
    counts = cells["counts"]
    left = cells["total"] - counts["done"] - counts["failed"]
    remote = any(e.startswith("worker-") for e in executors)
    return cells if remote or left or cells["lost_attempts"] else None
