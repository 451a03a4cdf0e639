"""The server's "draining" flag: an `asyncio.Event` that also calls back when it is set.

`Runtime.draining` is set when the server starts shutting down. A stream watches for it
(`tracecard.server.proxy.stream_watch.StreamWatch`): waiting on the event would take a task per
stream, which every proxied SSE answer that lasts a moment paid; a callback costs a set entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["DrainEvent"]


class DrainEvent(asyncio.Event):
    """An `asyncio.Event` whose `set()` also calls each callback given to `on_set` (once)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: set[Callable[[], None]] = set()

    def on_set(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the event is set; at once (in this call) if it is already."""
        if self.is_set():
            callback()
        else:
            self._callbacks.add(callback)

    def discard(self, callback: Callable[[], None]) -> None:
        """Forget `callback` (a stream that ended before the server drained)."""
        self._callbacks.discard(callback)

    def set(self) -> None:
        super().set()
        callbacks, self._callbacks = self._callbacks, set()
        for callback in callbacks:
            callback()
