"""`tracecard run --queue`: put an experiment's cells on the queue (workers run them) and follow
its progress (done, running, failed, infra, queued, an ETA) from the database, running nothing
here. Also what `tracecard experiment resume|rerun` enqueue with."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from tracecard.client import TracecardClient
from tracecard.server.errors import RunError
from tracecard.server.jobs.cell import Cell, cell_workflow_id
from tracecard.server.jobs.engine import APP_NAME, JOBS_VERSION
from tracecard.server.jobs.http import get_json

__all__ = ["dbos_client", "enqueue_cells", "follow", "progress_line"]


@contextmanager
def dbos_client(system_url: str) -> Iterator[Any]:
    """A DBOS client of the system database (it enqueues; it runs nothing)."""
    from dbos import DBOSClient

    try:
        client = DBOSClient(system_database_url=system_url, application_name=APP_NAME)
    except Exception as exc:  # noqa: BLE001 - the driver's error, said in our words
        raise RunError(f"cannot reach the jobs database {system_url}: {exc}") from exc
    try:
        yield client
    finally:
        client.destroy()


def enqueue_cells(system_url: str, cells: Sequence[tuple[Cell, str, int]]) -> list[str]:
    """Enqueue each (cell, queue, attempt); returns the workflow ids. A cell already enqueued
    under its id is not enqueued twice (DBOS attaches to the existing workflow)."""
    ids = []
    with dbos_client(system_url) as client:
        for cell, queue, attempt in cells:
            workflow_id = cell_workflow_id(
                cell["experiment_id"], cell["task_id"], cell["trial"], attempt
            )
            try:
                client.enqueue(
                    {
                        "workflow_name": "tracecard.cell",
                        "queue_name": queue,
                        "workflow_id": workflow_id,
                        "app_version": JOBS_VERSION,
                    },
                    cell,
                )
            except Exception as exc:  # noqa: BLE001 - e.g. no worker ever created the schema
                raise RunError(
                    f"cannot enqueue cell {workflow_id}: {exc} (has a `tracecard worker` "
                    "started on this database? it creates the jobs schema)"
                ) from exc
            ids.append(workflow_id)
    return ids


def progress_line(cells: dict[str, Any], started: float, done_before: int = 0) -> str:
    """`done 12 · running 3 · failed 1 · infra 0 · queued 44 · ETA 1m20s` for a person."""
    counts = cells["counts"]
    ended = counts["done"] + counts["failed"] + counts["infra"] + counts["cancelled"]
    left = cells["total"] - ended
    elapsed = time.monotonic() - started
    rate = (ended - done_before) / elapsed if elapsed > 0 else 0.0
    eta = f"{left / rate:.0f}s" if rate > 0 and left else ("-" if left else "0s")
    parts = [f"{name} {counts[name]}" for name in ("done", "running", "failed", "infra")]
    lost = cells.get("lost_attempts", 0)
    return (
        f"{' · '.join(parts)} · queued {counts['queued']} of {cells['total']}"
        + (f" · {lost} attempt(s) lost to workers" if lost else "")
        + f" · ETA {eta}"
    )


def follow(
    client: TracecardClient,
    experiment_id: str,
    console: Console,
    *,
    interval_s: float = 1.0,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Print the cells' progress until every cell has ended (or `timeout_s`); returns the last
    cells document (`GET /api/experiments/{id}/cells`)."""
    started = time.monotonic()
    first = get_json(client, f"/api/experiments/{experiment_id}/cells")
    counts = first["counts"]
    before = counts["done"] + counts["failed"] + counts["infra"] + counts["cancelled"]
    last_line = ""
    cells = first
    while True:
        line = progress_line(cells, started, before)
        if line != last_line:
            console.print(line)
            last_line = line
        counts = cells["counts"]
        if counts["queued"] == 0 and counts["running"] == 0:
            return cells
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            return cells
        time.sleep(interval_s)
        cells = get_json(client, f"/api/experiments/{experiment_id}/cells")
