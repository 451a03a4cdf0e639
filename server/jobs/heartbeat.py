"""Workers' heartbeats in `job_workers`, and the recovery of a dead worker's cells.

DBOS without its Conductor service recovers a crashed executor's workflows only when asked
(docs.dbos.dev, "Workflow Recovery", distributed setting): each live worker beats every
`interval` seconds and looks for workers silent for `lost_after` seconds; the first to claim
one (a conditional UPDATE, so exactly one) asks DBOS to recover that executor's pending cells,
which any worker then takes from the queue.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session
from sqlmodel import col, select

from tracecard.traces.db_clock import database_now
from tracecard.traces.models import JobWorkerRow
from tracecard.traces.store import Store

__all__ = ["Heartbeat", "silent_workers"]

log = logging.getLogger(__name__)


def silent_workers(session: Session, lost_after_s: float) -> Any:
    """The condition of a worker nobody claimed yet that is stopped or silent past
    `lost_after_s`, by the database's clock (heartbeats are stamped with it too: a worker whose
    clock is off is neither taken for dead nor kept alive by it)."""
    rows = JobWorkerRow
    cutoff = database_now(session) - timedelta(seconds=lost_after_s)
    silent = (col(rows.heartbeat_at) < cutoff) | col(rows.stopped_at).is_not(None)
    return col(rows.recovered_by).is_(None) & silent


class Heartbeat:
    """One worker's row, beaten by a thread; it also recovers the cells of silent workers."""

    def __init__(
        self,
        store: Store,
        executor: str,
        *,
        tags: list[str],
        concurrency: int,
        running: Callable[[], int],
        recover: Callable[[list[str]], int],
        interval_s: float = 5.0,
        lost_after_s: float = 30.0,
    ) -> None:
        self.store = store
        self.executor = executor
        self.running = running
        self.recover = recover
        self.interval_s = interval_s
        self.lost_after_s = lost_after_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tracecard-heartbeat", daemon=True)
        with store.writing() as session:
            now = database_now(session)
            session.add(
                JobWorkerRow(
                    id=executor,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    tags=tags,
                    concurrency=concurrency,
                    started_at=now,
                    heartbeat_at=now,
                )
            )

    def start(self) -> None:
        """Beat (and look for silent workers) until `stop`."""
        self._thread.start()

    def beat(self) -> None:
        """Say this worker is alive, and how many cells it runs."""
        with self.store.writing() as session:
            session.execute(
                update(JobWorkerRow)
                .where(col(JobWorkerRow.id) == self.executor)
                .values(heartbeat_at=database_now(session), running=self.running())
            )

    def recover_silent(self) -> list[str]:
        """Claim every worker silent past `lost_after_s` (or stopped) that nobody recovered yet,
        and recover its pending cells; returns the claimed workers' ids."""
        rows = JobWorkerRow
        with self.store.session() as session:
            unclaimed = silent_workers(session, self.lost_after_s)
            silent = list(
                session.scalars(select(rows.id).where(unclaimed, col(rows.id) != self.executor))
            )
        claimed = []
        for worker in silent:
            with self.store.writing() as session:
                won = session.execute(
                    update(rows)
                    .where(col(rows.id) == worker, col(rows.recovered_by).is_(None))
                    .values(recovered_by=self.executor)
                )
            if getattr(won, "rowcount", 0) == 1:  # this worker claimed it: it recovers it
                claimed.append(worker)
        if claimed:
            count = self.recover(claimed)
            log.warning("recovered %d cell(s) of silent worker(s) %s", count, ", ".join(claimed))
        return claimed

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
                self.recover_silent()
            except Exception:  # noqa: BLE001 - a database hiccup must not end the worker
                log.exception("heartbeat failed; retrying in %.1fs", self.interval_s)

    def stop(self) -> None:
        """Stop beating and mark this worker stopped: its cells still pending are recovered
        by the next live worker that looks."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval_s + 5)
        with self.store.writing() as session:
            session.execute(
                update(JobWorkerRow)
                .where(col(JobWorkerRow.id) == self.executor)
                .values(stopped_at=database_now(session), running=0)
            )
