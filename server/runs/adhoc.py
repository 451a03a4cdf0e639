"""Ad-hoc runs end: on their session's DELETE, after `adhoc_idle_s` without a request, and at
shutdown. Ending one stores its summary (calls, errors, client, upstreams, duration) and search
document, and emits its root span from the first recorded message to the last one's end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tracecard.server.run_threads import in_thread
from tracecard.server.runs.registry import RunInfo, client_label, emit, root_span
from tracecard.server.runtime import Runtime
from tracecard.traces.models import RunRow
from tracecard.traces.run_summary import end_run

__all__ = ["END_REASONS", "AdhocRuns", "adhoc_lifespan"]

log = logging.getLogger(__name__)

# Why an ad-hoc run ended (`runs.end_reason`).
END_REASONS = ("deleted", "closed", "idle", "shutdown")


class AdhocRuns:
    """Ends ad-hoc runs; the idle sweep runs every half `adhoc_idle_s` (at most every 15 s)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.idle_s = runtime.settings.adhoc_idle_s
        self._ending: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    def end_soon(self, info: RunInfo, reason: str) -> None:
        """End `info` in the background (from synchronous code: a session forgotten)."""
        if not info.adhoc or not self.runtime.runs.adhoc_ended(info):
            return
        task = asyncio.get_running_loop().create_task(self._store_end(info, reason))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def end(self, info: RunInfo, reason: str) -> None:
        """End `info` now (no-op if it has ended)."""
        if info.adhoc and self.runtime.runs.adhoc_ended(info):
            await self._store_end(info, reason)

    async def sweep(self) -> None:
        """End every ad-hoc run without a request for `adhoc_idle_s`."""
        now = time.monotonic()
        for info in self.runtime.runs.live_adhoc():
            if now - info.last_seen <= self.idle_s:
                break  # oldest first: the rest are more recent
            await self.end(info, "idle")

    async def close(self) -> None:
        """At shutdown: stop sweeping, end every live ad-hoc run, wait for the writes."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for info in self.runtime.runs.live_adhoc():
            self.end_soon(info, "shutdown")
        if self._ending:
            await asyncio.gather(*list(self._ending), return_exceptions=True)

    async def _sweep_forever(self) -> None:
        interval = max(0.02, min(self.idle_s / 2, 15.0))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception:  # a database hiccup must not stop the sweeping
                log.exception("ending idle ad-hoc runs failed")

    async def _store_end(self, info: RunInfo, reason: str) -> None:
        runtime = self.runtime
        try:
            await runtime.flush()  # its spans are stored: the summary counts them all
            done = await in_thread(_write_end, runtime, info, reason)
            if done is None:
                return
            row, first, last = done
            # the root ends where its last child ended, not when tracecard noticed the end
            end_ns = last or time.time_ns()
            start_ns = first or end_ns
            root = root_span(row, end_ns=end_ns, resource=runtime.resource, start_ns=start_ns)
            emit(runtime.span_sink, root)
        except Exception:
            log.exception("could not end ad-hoc run %s (%s)", info.id, reason)


def _write_end(
    runtime: Runtime, info: RunInfo, reason: str
) -> tuple[RunRow, int | None, int | None] | None:
    """The ended run's row: finished, its summary, search document (a worker thread)."""
    # one write: a reader never sees the run finished without its reason and end
    ended = end_run(
        runtime.store,
        info.id,
        client_label(info.client),
        finish=True,
        index=True,  # its search document in the same transaction
        status="finished",
        end_reason=reason,
    )
    if ended is None:
        return None
    row, summary = ended
    return row, summary.first_ns, summary.last_ns


@asynccontextmanager
async def adhoc_lifespan(runtime: Runtime) -> AsyncIterator[AdhocRuns]:
    """Sweep idle ad-hoc runs for the app's lifetime; end the rest at shutdown."""
    adhoc = AdhocRuns(runtime)
    runtime.adhoc = adhoc
    adhoc.start()
    try:
        yield adhoc
    finally:
        await adhoc.close()
        runtime.adhoc = None
