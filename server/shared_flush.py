"""Flushes asked for at the same time share one (`Runtime.flush`).

A flush waits until every span recorded so far is committed: it hurries the batch processor's
export, its spool write (fsync'd on PostgreSQL), and a database commit. Every ad-hoc run ends
with one (its summary counts its spans), so 32 MCP sessions closing together asked for 32
flushes, each an export, a spool write and a commit of the few spans the one before had left.
A caller that asks while a flush runs needs one that starts after it asked (the running one
may have taken its snapshot before the caller's spans were recorded): it waits for the next,
which every caller that asks meanwhile shares. A burst of N costs two flushes, not N.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["SharedFlush"]


def _consume(task: asyncio.Task[None]) -> None:
    """A flush whose callers were all cancelled: its error is not left unretrieved."""
    if not task.cancelled():
        task.exception()


class SharedFlush:
    """`await shared()` returns once a flush that started after the call has finished (its
    error, if it failed, is raised to every caller that shared it). A cancelled caller stops
    waiting; the flush goes on for the others."""

    __slots__ = ("_flush", "_next", "_running")

    def __init__(self, flush: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._flush = flush
        self._running: asyncio.Task[None] | None = None
        self._next: asyncio.Task[None] | None = None

    async def __call__(self) -> None:
        task = self._next
        if task is None:
            loop = asyncio.get_running_loop()
            running = self._running
            if running is None or running.done():
                task = self._running = loop.create_task(self._flush())
            else:
                task = self._next = loop.create_task(self._after(running))
            task.add_done_callback(_consume)
        await asyncio.shield(task)

    async def _after(self, running: asyncio.Task[None]) -> None:
        await asyncio.wait([running])  # (its outcome is its own callers')
        self._running, self._next = self._next, None
        await self._flush()
