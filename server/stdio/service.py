"""Wiring of the stdio bridge: the bridge on the runtime, the per-run stop hook, shutdown.

The HTTP proxy (`tracecard.server.proxy`) owns `/mcp/{upstream}` and hands stdio upstreams to
the bridge (`runtime.stdio`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tracecard.server.recording.recorder import Recorder
from tracecard.server.runtime import Runtime
from tracecard.server.stdio.bridge import StdioBridge
from tracecard.server.stdio.pool import StdioUpstreams


@asynccontextmanager
async def stdio_lifespan(runtime: Runtime) -> AsyncIterator[StdioBridge]:
    """Start the bridge and its per-run stop hook; stop every child process on the way out."""
    upstreams = runtime.settings.upstreams
    recorder = Recorder(
        runtime.tracer,
        runtime.settings.recording,
        runtime.fingerprint_key,
        [name for name, upstream in upstreams.items() if not upstream.redact],
        runtime.hooks,
        runtime.tool_links,
    )
    pool = StdioUpstreams(runtime, recorder)
    bridge = StdioBridge(runtime, recorder, pool)
    runtime.stdio = bridge
    runtime.hooks.after_finish.append(pool.after_finish)
    runtime.hooks.after_finish.append(bridge.listens.after_finish)
    try:
        yield bridge
    finally:
        await bridge.close()
        runtime.stdio = None
