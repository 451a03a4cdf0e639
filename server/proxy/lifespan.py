"""The proxy's lifespan: its upstream client, open for the app's lifetime."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tracecard.server.proxy.state import ProxyState, build_state
from tracecard.server.runtime import Runtime

__all__ = ["proxy_lifespan"]


@asynccontextmanager
async def proxy_lifespan(runtime: Runtime) -> AsyncIterator[ProxyState]:
    """Open the proxy's upstream client for the app's lifetime; close it on shutdown."""
    httpx_log = logging.getLogger("httpx")
    if httpx_log.level == logging.NOTSET:  # unless configured: an INFO line per call cost ~15 %
        httpx_log.setLevel(logging.WARNING)  # of the proxy's CPU (spans record every call)
    state = build_state(runtime)
    runtime.proxy = state
    gc.freeze()  # startup objects out of the GC's generations: re-scanning them cost ~9 % CPU
    try:
        yield state
    finally:
        gc.unfreeze()  # several apps may live in one process (tests): let theirs be collected
        runtime.proxy = None
        await state.client.aclose()
