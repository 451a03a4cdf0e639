"""The stdio bridge's SSE responses: events written from any task, one writer at a time."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import Iterable
from typing import Any

from tracecard.server.asgi import Send, json_bytes, sse_frame

KEEPALIVE_S = 15.0


class SseStream:
    """An SSE response whose events may be written from any task (one writer at a time)."""

    def __init__(self, send: Send, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        self._send = send
        self._headers = list(headers)
        self._ids = itertools.count(1)
        self._id_prefix = secrets.token_hex(6)  # event ids unique across streams
        self._lock = asyncio.Lock()
        self.started = False
        self.closed = False

    async def start(self) -> None:
        async with self._lock:
            await self._start()

    async def _start(self) -> None:
        if self.started:
            return
        self.started = True
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"x-accel-buffering", b"no"),
            *self._headers,
        ]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def write(self, chunk: bytes) -> bool:
        """Send one chunk; False once the stream is closed or the client has gone."""
        async with self._lock:
            if self.closed:
                return False
            try:
                await self._start()
                await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
            except OSError:
                self.closed = True
                return False
            return True

    async def event(self, message: Any) -> bool:
        event_id = f"{self._id_prefix}-{next(self._ids)}"
        return await self.write(sse_frame(json_bytes(message), event_id))

    async def close(self) -> None:
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            with contextlib.suppress(OSError):
                await self._start()
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
