"""The blocking database work of an ad-hoc run's life, off the event loop, at less cost to it.

Every MCP session opens and ends an ad-hoc run: its row's insert, the flush at its end and the
end's writes each went to a worker thread through `anyio.to_thread.run_sync`, whose hop cost
the event loop more than the proxied requests of a short session's (a capacity limiter, cancel
scopes, a root-task lookup, a thread per waiting call). `in_thread` runs them on a small pool of
its own through `loop.run_in_executor`, with anyio's guarantee kept: a cancelled caller waits
for the call to finish before it sees the cancellation, so nothing it started runs on behind
it (at shutdown, the engine is disposed only after the writes end).

The pool is the process's, made on first use; a forked child (the BFCL pre-fork workers) makes
its own, since the parent's threads do not exist there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["RUN_THREADS", "in_thread"]

_T = TypeVar("_T")

RUN_THREADS = 8  # SQLite takes one writer at a time; PostgreSQL's pool holds 5 (+10)
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(RUN_THREADS, thread_name_prefix="tracecard-runs")
    return _pool


def _forget_after_fork() -> None:
    global _pool
    _pool = None  # (its threads are the parent's: the child's first call makes a pool)


os.register_at_fork(after_in_child=_forget_after_fork)


async def in_thread(function: Callable[..., _T], *args: Any) -> _T:
    """`function(*args)` in a thread of the pool; if the caller is cancelled meanwhile, it
    waits for the call to end, then raises `CancelledError`."""
    future = asyncio.get_running_loop().run_in_executor(_executor(), function, *args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.wait([future])
            except asyncio.CancelledError:
                continue  # (cancelled again: still not before the call ends)
        if not future.cancelled():
            future.exception()  # (retrieved: the caller's cancellation is what it sees)
        raise
