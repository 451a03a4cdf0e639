"""Keep-alive HTTP/1.1 upstream connections on httptools (llhttp), for the proxy's MCP path.

aiohttp's client cost ~0.1 ms of CPU per call on the proxy's hot path (a `ClientRequest`, a
`StreamWriter`, a `ClientResponse` with its `StreamReader`, header `CIMultiDict`s built and
copied, timers, traces) where a call needs one write and one parse (#24 item 2). Here a request
is its head and body in one write on a pooled connection, and the answer is parsed by the
same llhttp that uvicorn and aiohttp use, into the `(bytes, bytes)` pairs the proxy passes on.

The answers look like aiohttp's to the callers (`server/proxy/relay.py`): the same
`UpstreamResponse` interface, and the same exception classes for the same failures, so every
error path is as before: no connection is an `aiohttp.ClientOSError` (unavailable), a connect
past its bound `UpstreamConnectTimeout`, a head that is not HTTP an `aiohttp.ClientResponseError`
(the upstream broke its answer), a connection lost before the head an
`aiohttp.ServerDisconnectedError`, a body cut short an `aiohttp.ClientPayloadError`.

Only `http://` upstreams and the methods the MCP proxy sends go this way; TLS and anything else
stay on aiohttp (`server/proxy/transport.py`).
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from yarl import URL

from tracecard.server.proxy.wire_connection import (
    UpstreamBrokenHead,
    UpstreamConnectError,
    UpstreamConnectTimeout,
    WireConnection,
    WireHeaders,
)

__all__ = [
    "WIRE_METHODS",
    "UpstreamBrokenHead",
    "UpstreamConnectError",
    "UpstreamConnectTimeout",
    "WireClient",
    "WireHeaders",
    "WireResponse",
]

_T = TypeVar("_T")

WIRE_METHODS = frozenset({"POST", "GET", "DELETE"})
_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})  # no Content-Length: 0
_IDLE_MAX = 64  # idle connections kept per upstream address
# An idle connection is reused only this long after its last answer. An upstream closes idle
# connections at its keep-alive timeout (uvicorn 5 s, Node's http 5 s); a request written as that
# close crosses it is lost with "disconnected" and, being a POST, cannot be sent again. 2 s keeps
# clear of the common timeouts, as the API client does (`tracecard/_requests.py`).
_IDLE_EXPIRY = 2.0
_TARGETS_MAX = 256  # target URLs remembered (an upstream's endpoint, with each query string)


class WireResponse:
    """An answer whose head has arrived (the `UpstreamResponse` interface)."""

    __slots__ = ("_client", "_conn", "headers", "raw_headers", "status_code")

    def __init__(self, client: WireClient, conn: WireConnection, status: int) -> None:
        self._client = client
        self._conn: WireConnection | None = conn
        self.status_code = status
        self.raw_headers: tuple[tuple[bytes, bytes], ...] = tuple(conn.raw)
        # case-insensitive lookups, values decoded as aiohttp decodes them
        self.headers = WireHeaders(self.raw_headers)

    async def read_chunk(self) -> bytes:
        """The body's bytes that arrived since the last read; b"" at its end."""
        conn = self._conn
        if conn is None:
            return b""
        chunks = conn.chunks
        while not chunks:
            if conn.error is not None:
                raise conn.error
            if conn.done:
                return b""
            waiter = conn.waiter = conn.loop.create_future()
            try:
                await waiter
            finally:
                conn.waiter = None
        data = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        conn.buffered = 0
        if conn.paused and conn.transport is not None and not conn.closed:
            conn.paused = False
            conn.transport.resume_reading()
        return data

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        while chunk := await self.read_chunk():
            yield chunk

    def take_whole(self, limit: int) -> bytes | None:
        """The whole body if it has all arrived (at most `limit` bytes), the connection then
        back in the pool; None: read it with `read_chunk` (a small answer usually arrives with
        its head, and is then taken without a coroutine per read)."""
        conn = self._conn
        if conn is None or not conn.done or conn.error is not None or conn.buffered > limit:
            return None
        chunks = conn.chunks
        data = b"" if not chunks else chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        conn.buffered = 0
        self._conn = None
        self._client.release(conn)
        return data

    def items(self) -> list[tuple[str, str]]:
        return self.headers.items()

    async def aclose(self) -> None:
        """A body read to its end puts the connection back in the pool; else it is closed."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._client.release(conn)

    def __del__(self) -> None:
        # an answer dropped unclosed (its caller failed before `aclose`) gives its connection
        # back, as aiohttp's ClientResponse does: closed, so the connection limit cannot leak
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            self._client.release(conn)


def _expire(head: asyncio.Future[int]) -> None:
    """The deadline passed before the answer's head came."""
    if not head.done():
        head.set_exception(TimeoutError())


async def _within(deadline: float | None, waiting: Awaitable[_T]) -> _T:
    if deadline is None:
        return await waiting
    async with asyncio.timeout_at(deadline):
        return await waiting


class WireClient:
    """Pooled keep-alive connections per upstream address, at most `limit` busy at once."""

    def __init__(self, limit: int, connect_timeout: float) -> None:
        self._connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int], list[WireConnection]] = {}
        # at most `limit` connections busy at once: a free count, and the requests waiting for
        # one (each is handed a freed slot in turn)
        self._limit = limit
        self._free = limit
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._busy: set[WireConnection] = set()
        # per target URL: (the URL, its pool key, the request line's tail and Host line)
        self._targets: dict[int, tuple[URL, tuple[str, int], str]] = {}

    def _target(self, url: URL) -> tuple[tuple[str, int], str]:
        known = self._targets.get(id(url))
        if known is None or known[0] is not url:
            key = (url.raw_host or "", url.port or 80)
            line = f" {url.raw_path_qs} HTTP/1.1\r\nHost: {url.host_port_subcomponent}\r\n"
            if len(self._targets) >= _TARGETS_MAX:
                self._targets.clear()
            known = self._targets[id(url)] = (url, key, line)
        return known[1], known[2]

    async def _slot(self) -> None:
        """Wait for a connection slot (all `limit` are busy); `_free_slot` hands it over."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._free_slot()  # handed a slot as it was cancelled: pass it on
            elif waiter in self._waiting:
                self._waiting.remove(waiter)
            raise

    def _free_slot(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    async def open(
        self,
        method: str,
        url: URL,
        headers: list[tuple[str, str]],
        body: bytes,
        deadline: float | None = None,
    ) -> WireResponse:
        """Send the request (head and body in one write); return once the answer's head came.

        `deadline` (the loop's clock): `TimeoutError` if the head has not come by then, from a
        timer on the head (a wait for a free connection or a new one, rarer, under
        `asyncio.timeout_at`); the caller's own deadline then stops the body's reads."""
        text = "\r\n".join(map(": ".join, headers)) + "\r\n" if headers else ""
        if text.count("\n") != len(headers) or text.count("\r") != len(headers):
            raise ValueError("Newline or carriage return character detected in a header")
        if body or method not in _NO_BODY_METHODS:
            text = f"{text}Content-Length: {len(body)}\r\n"
        key, line = self._target(url)
        data = f"{method}{line}{text}\r\n".encode()
        if body:
            data += body
        if self._limit:
            if self._free > 0 and not self._waiting:
                self._free -= 1
            else:
                await _within(deadline, self._slot())
        try:
            idle = self._idle_connection(key)
            conn = idle if idle is not None else await _within(deadline, self._connect(key))
        except BaseException:
            if self._limit:
                self._free_slot()
            raise
        self._busy.add(conn)
        loop = conn.loop
        conn.head = head = loop.create_future()
        timer = loop.call_at(deadline, _expire, head) if deadline is not None else None
        try:
            assert conn.transport is not None
            conn.transport.write(data)
            status = await head
        except BaseException:
            conn.close()
            self.release(conn)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        return WireResponse(self, conn, status)

    def _idle_connection(self, key: tuple[str, int]) -> WireConnection | None:
        """A pooled connection to reuse, if one is fresh (no coroutine: the usual case)."""
        idle = self._idle.get(key)
        if not idle:
            return None
        while idle:
            conn = idle.pop()  # the newest first: when it is stale, so are all the others
            if conn.closed:
                continue
            if conn.idle_since >= conn.loop.time() - _IDLE_EXPIRY:
                return conn
            conn.close()
            for stale in list(idle):
                stale.close()
        return None

    async def _connect(self, key: tuple[str, int]) -> WireConnection:
        idle = self._idle.get(key)
        if idle is None:
            idle = self._idle[key] = []
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _transport, conn = await loop.create_connection(
                    lambda: WireConnection(idle), key[0], key[1]
                )
        except TimeoutError as exc:
            raise UpstreamConnectTimeout(f"Connection timeout to host {key[0]}:{key[1]}") from exc
        except OSError as exc:
            raise UpstreamConnectError(
                exc.errno or 0, f"Cannot connect to host {key[0]}:{key[1]} [{exc.strerror or exc}]"
            ) from exc
        sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def release(self, conn: WireConnection) -> None:
        """Done with the connection's answer: back to the pool if it ended cleanly."""
        if conn not in self._busy:
            return
        self._busy.discard(conn)
        if self._limit:
            self._free_slot()
        if conn.done and conn.reusable and not conn.closed and not conn.chunks:
            conn.head, conn.raw, conn.done, conn.reusable = None, [], False, False
            conn.buffered, conn.error = 0, None
            if conn.paused and conn.transport is not None:
                conn.paused = False
                conn.transport.resume_reading()
            if len(conn.pool) < _IDLE_MAX:
                conn.idle_since = conn.loop.time()
                conn.pool.append(conn)
                return
        conn.close()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in list(idle):
                conn.close()
        for conn in list(self._busy):
            conn.close()
        self._idle.clear()
