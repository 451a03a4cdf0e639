"""Wiring: the logical calls on the runtime's hooks, ended with their run, swept, closed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from tracecard.server.mrtr.calls import IDLE_S, LogicalCalls

if TYPE_CHECKING:
    from tracecard.server.runtime import Runtime
    from tracecard.traces.models import RunRow

SWEEP_S = 30.0  # how often calls left waiting for a retry are looked at


def install_mrtr(runtime: Runtime) -> LogicalCalls:
    """Put the logical calls on the hooks (before the recorders are built: they read it)."""
    calls = LogicalCalls()
    runtime.hooks.mrtr = calls

    async def end_run_calls(_runtime: Runtime, row: RunRow) -> dict[str, Any] | None:
        """A finished run's calls that wait for a retry end (incomplete) before it is scored."""
        calls.end_run(row.id)
        return None

    runtime.hooks.on_finish.insert(0, end_run_calls)
    return calls


@asynccontextmanager
async def mrtr_lifespan(runtime: Runtime) -> AsyncIterator[None]:
    """Sweep calls left waiting; at shutdown end the rest (after the proxy has drained)."""
    calls = runtime.hooks.mrtr

    async def sweep() -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            if calls is not None:
                calls.sweep(IDLE_S)

    task = asyncio.get_running_loop().create_task(sweep())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if calls is not None:
            calls.close()
