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
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlmodel import col, select

from tracecard.traces.models import JobWorkerRow
from tracecard.traces.store import Store

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)


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
        now = datetime.now(UTC)
        with store.writing() as session:
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
                .values(heartbeat_at=datetime.now(UTC), running=self.running())
            )

    def recover_silent(self) -> list[str]:
        """Claim every worker silent past `lost_after_s` (or stopped) that nobody recovered yet,
        and recover its pending cells; returns the claimed workers' ids."""
        cutoff = datetime.now(UTC) - timedelta(seconds=self.lost_after_s)
        rows = JobWorkerRow
        with self.store.session() as session:
            silent = list(
                session.scalars(
                    select(rows.id).where(
                        col(rows.recovered_by).is_(None),
                        col(rows.id) != self.executor,
                        (col(rows.heartbeat_at) < cutoff) | col(rows.stopped_at).is_not(None),
                    )
                )
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
                .values(stopped_at=datetime.now(UTC), running=0)
            )
