"""The proxy's lifespan: its upstream client, open for the app's lifetime."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tracecard.server.proxy.state import ProxyState, build_state
from tracecard.server.runtime import Runtime

__all__ = ["proxy_lifespan"]

# Allocations between two young-generation collections (CPython's default: 700). An OTLP
# request of 1,000 spans allocates ~5,000 containers that live until its commit: at 700 they
# were scanned 7 times a request, survived, and were scanned again in the older generations
# (GC took 2-3 us of CPU a span, about 8 % of the server's ingest CPU). At 50,000 most of a
# request's objects are freed by reference counting before any collection sees them; cyclic
# garbage waits a little longer (at most this many objects) before it is collected.
YOUNG_COLLECTION_EVERY = 50_000


@asynccontextmanager
async def proxy_lifespan(runtime: Runtime) -> AsyncIterator[ProxyState]:
    """Open the proxy's upstream client for the app's lifetime; close it on shutdown."""
    httpx_log = logging.getLogger("httpx")
    if httpx_log.level == logging.NOTSET:  # unless configured: an INFO line per call cost ~15 %
        httpx_log.setLevel(logging.WARNING)  # of the proxy's CPU (spans record every call)
    state = build_state(runtime)
    runtime.proxy = state
    gc.freeze()  # startup objects out of the GC's generations: re-scanning them cost ~9 % CPU
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], YOUNG_COLLECTION_EVERY), *thresholds[1:])
    try:
        yield state
    finally:
        gc.unfreeze()  # several apps may live in one process (tests): let theirs be collected
        gc.set_threshold(*thresholds)
        runtime.proxy = None
        await state.client.aclose()
