"""Watching a relayed stream: the agent hanging up, or the server draining, ends it.

Split from `server/proxy/relay.py`, which starts one for every SSE answer it relays.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tracecard.server.asgi import Receive
from tracecard.server.draining import DrainEvent

if TYPE_CHECKING:
    from tracecard.server.proxy.calls import Calls

# A stream is watched (for the agent hanging up, or the server draining) once it has lasted this
# long: most streams (an SSE answer to one POST) end well within it, and the watcher's task costs
# CPU a call pays. At 50 ms, with 32 sessions in flight (an answer took ~47 ms on average at
# ~680 calls/s), many SSE answers lasted long enough, and watching them cost ~10 % of the
# proxy's CPU a call (0.523 against 0.472 ms, paired). A hang-up or a drain is seen at most
# this much later.
WATCH_AFTER_S = 0.5


def watch_disconnect(receive: Receive) -> StreamWatch:
    """Cancels the current task when the agent disconnects (ends long streams)."""
    return StreamWatch(receive, None, None)


DISCONNECTED = "client_disconnected"
DRAINING = "draining"


class StreamWatch:
    """Cancels the current task when the agent disconnects, or when the server drains and the
    stream owes no answer (an endless GET stream); `fired` says which, once it has.

    Until the stream has lasted `WATCH_AFTER_S` it is a timer; then one task waits for the
    agent's disconnect, and the drain is a callback of `Runtime.draining` (a task only once the
    server drains). It was three tasks and an `asyncio.wait` a watched stream."""

    __slots__ = ("_calls", "_draining", "_handle", "_reason", "_streaming", "_tasks")

    def __init__(self, receive: Receive, calls: Calls | None, draining: DrainEvent | None) -> None:
        streaming = asyncio.current_task()
        assert streaming is not None
        self._streaming = streaming
        self._calls = calls
        self._draining = draining
        self._reason: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # the stream's loop, from its task (on Python 3.11 `asyncio.get_running_loop()` costs a
        # getpid() syscall)
        loop = streaming.get_loop()
        self._handle: asyncio.TimerHandle | None = loop.call_later(
            WATCH_AFTER_S, self._start, receive
        )

    def _start(self, receive: Receive) -> None:
        self._handle = None
        if self._streaming.done():
            return
        self._tasks.append(asyncio.get_running_loop().create_task(self._disconnected(receive)))
        if self._draining is not None:
            self._draining.on_set(self._drain)

    async def _disconnected(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._stop(DISCONNECTED)

    def _drain(self) -> None:
        if self._reason is None and not self._streaming.done():
            self._tasks.append(asyncio.get_running_loop().create_task(self._drained()))

    async def _drained(self) -> None:
        calls = self._calls
        while calls is not None and calls.requests:  # an answer is owed: it ends the stream
            await asyncio.sleep(0.1)
        self._stop(DRAINING)

    def _stop(self, reason: str) -> None:
        if self._reason is None and not self._streaming.done():
            self._reason = reason
            self._streaming.cancel(reason)

    def fired(self) -> str | None:
        """Why it cancelled the stream's task, or None if it did not."""
        return self._reason

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._draining is not None:
            self._draining.discard(self._drain)
        for task in self._tasks:
            task.cancel()
