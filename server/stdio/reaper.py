"""Per-run processes that nobody will stop: bounded, reaped when idle or finished elsewhere.

A `per_run` upstream starts one process per run. Named runs stop theirs when they finish, but
ad-hoc runs (sessions that never send DELETE, stateless clients) never finish, and a run
finished on another replica (several tracecards on one database) never tells this one. So:
- at most `adhoc_max` processes of ad-hoc runs: starting one more stops the least recently used;
- an ad-hoc run's process idle for `adhoc_idle_s` is stopped;
- a named run's process idle for `check_idle_s` is stopped once the database says the run is
  over (finished, errored, timed out), wherever it was finished.
A stopped run's next call starts a fresh process in the same sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

import anyio.to_thread

if TYPE_CHECKING:
    from tracecard.server.stdio.pool import Slot, StdioUpstreams

log = logging.getLogger(__name__)

ADHOC_PROCESSES_MAX = 16
ADHOC_IDLE_S = 600.0
CHECK_IDLE_S = 30.0
SWEEP_S = 15.0


def is_adhoc(slot: Slot) -> bool:
    return slot.run is not None and slot.run.config_name == "adhoc"


class Reaper:
    """Stops the per-run processes of `pool` that no finish will stop."""

    def __init__(self, pool: StdioUpstreams) -> None:
        self.pool = pool
        self.adhoc_max = ADHOC_PROCESSES_MAX
        self.adhoc_idle_s = ADHOC_IDLE_S
        self.check_idle_s = CHECK_IDLE_S
        self.sweep_s = SWEEP_S
        self._task: asyncio.Task[None] | None = None

    def started(self, slot: Slot) -> None:
        """A per-run process started: keep the ad-hoc ones under the cap, sweep from now on."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._sweep_forever())
        running = [s for s in self.pool.per_run.values() if is_adhoc(s) and s.process is not None]
        running.sort(key=lambda s: s.last_used)
        for stale in running[: max(len(running) - self.adhoc_max, 0)]:
            if stale is not slot:
                self._stop(stale, "over the cap of ad-hoc processes")

    async def sweep(self) -> None:
        """One pass: stop idle ad-hoc processes, and those of runs the database says are over."""
        now = time.monotonic()
        for slot in list(self.pool.per_run.values()):
            if slot.process is None or slot.run is None:
                continue
            idle = now - slot.last_used
            if is_adhoc(slot):
                if idle > self.adhoc_idle_s:
                    self._stop(slot, f"idle for {idle:.0f}s")
            elif idle > self.check_idle_s and await self._run_over(slot.run.id):
                self._stop(slot, "its run is over (finished here or on another replica)")

    async def _run_over(self, run_id: str) -> bool:
        row = await anyio.to_thread.run_sync(self.pool.runtime.store.get_run, run_id)
        return row is not None and row.status not in ("pending", "running")

    def _stop(self, slot: Slot, why: str) -> None:
        assert slot.run is not None
        log.info("stopping upstream %s of run %s: %s", slot.name, slot.run.id, why)
        self.pool.per_run.pop((slot.name, slot.run.id), None)
        process, slot.process = slot.process, None
        if process is not None:
            asyncio.get_running_loop().create_task(process.stop())

    async def _sweep_forever(self) -> None:
        while not self.pool.closed:
            await asyncio.sleep(self.sweep_s)
            try:
                await self.sweep()
            except Exception:  # a database hiccup must not end the sweeping
                log.exception("sweeping per-run processes failed")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
