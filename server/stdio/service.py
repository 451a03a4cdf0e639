"""Wiring: the bridge on the runtime, the finish hook, shutdown, and stand-in routes.

The HTTP proxy (`tracecard.server.proxy`) owns `/mcp/{upstream}` and hands stdio upstreams to
the bridge.
When no proxy feature is installed, the routes below serve stdio upstreams on their own, with
the run taken from the path, the `Tracecard-Run` header or baggage.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import asgi
from litestar.types import Receive, Scope, Send

from tracecard.server.recording.ingest import header_run
from tracecard.server.recording.recorder import Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runtime import Runtime
from tracecard.server.stdio.asgi import header_map, send_json
from tracecard.server.stdio.bridge import StdioBridge
from tracecard.server.stdio.pool import StdioUpstreams


def setup(runtime: Runtime) -> Any:
    """Register the bridge and the per-run stop hook; the returned context stops processes."""
    recorder = Recorder(runtime.tracer, runtime.settings.recording)
    pool = StdioUpstreams(runtime, recorder)
    bridge = StdioBridge(runtime, recorder, pool)
    runtime.extensions["stdio"] = bridge
    runtime.extensions.setdefault("after_finish_hooks", []).append(pool.after_finish)

    @asynccontextmanager
    async def lifetime() -> AsyncIterator[StdioBridge]:
        try:
            yield bridge
        finally:
            await bridge.close()

    return lifetime()


async def _serve(scope: Scope, receive: Receive, send: Send, run_id: str | None) -> None:
    runtime: Runtime = scope["app"].state.runtime
    bridge: StdioBridge = runtime.extensions["stdio"]
    upstream = scope["path_params"]["upstream"]
    run: RunInfo | None = None
    run_id = run_id or header_run(header_map(dict(scope)))
    if run_id is not None:
        run = await runtime.runs.resolve(run_id)
        if run is None:
            await send_json(send, 404, {"detail": f"no run with id {run_id!r}"})  # type: ignore[arg-type]
            return
    await bridge(scope, receive, send, upstream, run)  # type: ignore[arg-type]


@asgi("/mcp/{upstream:str}", copy_scope=False)
async def stdio_mcp(scope: Scope, receive: Receive, send: Send) -> None:
    """A stdio upstream at `/mcp/{upstream}` (stand-in while no proxy is installed)."""
    await _serve(scope, receive, send, None)


@asgi("/runs/{run_id:str}/mcp/{upstream:str}", copy_scope=False)
async def stdio_run_mcp(scope: Scope, receive: Receive, send: Send) -> None:
    """A stdio upstream with the run in the path (stand-in while no proxy is installed)."""
    await _serve(scope, receive, send, scope["path_params"]["run_id"])


def _proxy_installed() -> bool:
    try:
        module = importlib.import_module("tracecard.server.proxy")
    except ModuleNotFoundError:
        return False
    return hasattr(module, "feature")


def feature() -> tuple[list[Any], Any]:
    """Routes only when no proxy serves `/mcp/...`; the set-up always."""
    routes: list[Any] = [] if _proxy_installed() else [stdio_mcp, stdio_run_mcp]
    return routes, setup
