"""Small ASGI helpers for the stdio bridge: headers, bodies, JSON answers and SSE streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import orjson

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

KEEPALIVE_S = 15.0


class BodyTooLarge(Exception):
    """The request body is over the configured limit."""


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers, names lower-cased (the last value wins)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body over the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def send_body(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: str | None = "application/json",
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if content_type is not None:
        raw.append((b"content-type", content_type.encode()))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, document: Any, headers: Iterable[tuple[str, str]] = ()
) -> None:
    await send_body(send, status, orjson.dumps(document), headers=headers)


def sse_event(message: Any) -> bytes:
    return b"event: message\r\ndata: " + orjson.dumps(message) + b"\r\n\r\n"


class SseStream:
    """An SSE response whose events may be written from any task (one writer at a time)."""

    def __init__(self, send: Send, headers: Iterable[tuple[str, str]] = ()) -> None:
        self._send = send
        self._headers = list(headers)
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
            *[(k.encode("latin-1"), v.encode("latin-1")) for k, v in self._headers],
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
        return await self.write(sse_event(message))

    async def close(self) -> None:
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            with contextlib.suppress(OSError):
                await self._start()
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})


async def wait_disconnect(receive: Receive) -> None:
    """Return when the client goes away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
