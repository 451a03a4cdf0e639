"""A run's infrastructure failures, kept in the database the moment they happen.

A per-run upstream whose sandbox could not be made (`sandbox_failed`) or whose process never got
through its start (`upstream_never_started`) dooms its run: it ends errored with that reason and
is never scored, whatever the agent answered. The process serving the run's proxy sees the
failure; another process may end the run: a replica the finish reached, a worker that resumes
the cell after the first one died (its lost attempt then ends with this reason, not
`worker_lost`). So the failure is a row of `run_infra_failures`, one per (run, upstream), deleted
when that upstream later starts for the run after all.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete
from sqlmodel import col, select

from tracecard.traces.models import InfraFailureRow
from tracecard.traces.store import Store

__all__ = ["clear", "of_run", "of_runs", "record"]

_CHUNK = 500  # run ids per `IN (...)`


def record(store: Store, run_id: str, upstream: str, reason: str, why: str) -> None:
    """Say that `upstream` never started for `run_id` (the latest reason and why are kept)."""
    with store.writing() as session:
        session.merge(InfraFailureRow(run_id=run_id, upstream=upstream, reason=reason, why=why))


def clear(store: Store, run_id: str, upstream: str) -> None:
    """`upstream` started for `run_id` after all: its failure is no longer the run's fate."""
    rows = InfraFailureRow
    with store.writing() as session:
        session.execute(
            delete(rows).where(col(rows.run_id) == run_id, col(rows.upstream) == upstream)
        )


def of_runs(store: Store, run_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Run id -> (reason, why) of its first recorded failure, for the runs that have one."""
    ids = list(dict.fromkeys(run_ids))
    found: dict[str, tuple[str, str]] = {}
    rows = InfraFailureRow
    with store.session() as session:
        for start in range(0, len(ids), _CHUNK):
            query = select(rows).where(col(rows.run_id).in_(ids[start : start + _CHUNK]))
            for row in session.scalars(query.order_by(col(rows.recorded_at))):
                found.setdefault(row.run_id, (row.reason, row.why))
    return found


def of_run(store: Store, run_id: str) -> tuple[str, str] | None:
    """(reason, why) of the run's first recorded failure, or None."""
    return of_runs(store, [run_id]).get(run_id)
