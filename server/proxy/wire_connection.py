"""One keep-alive HTTP/1.1 connection to an upstream, its answer parsed by httptools (llhttp),
and the answer's headers as the proxy looks them up: the parts of `server/proxy/wire.py` below
the client. The errors are aiohttp's classes, so every error path answers as with aiohttp."""

from __future__ import annotations

import asyncio
from collections import deque
from operator import itemgetter
from typing import overload

import aiohttp
import httptools

__all__ = [
    "UpstreamBrokenHead",
    "UpstreamConnectError",
    "UpstreamConnectTimeout",
    "WireConnection",
    "WireHeaders",
]

_HIGH_WATER = 1 << 17  # buffered body bytes before the socket is paused (aiohttp: 2 x 64 KiB)


class UpstreamConnectTimeout(aiohttp.ClientConnectionError):
    """No connection within the connect bound: the upstream is unavailable (not a deadline)."""


class UpstreamConnectError(aiohttp.ClientOSError):
    """The upstream refused or could not be reached: unavailable."""


class UpstreamBrokenHead(aiohttp.ClientResponseError):
    """The upstream answered with something that is not an HTTP/1.1 head."""

    def __init__(self, message: str) -> None:
        super().__init__(None, (), message=message)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.message


class WireConnection(asyncio.Protocol):
    """One keep-alive connection, carrying one request at a time."""

    def __init__(self, pool: list[WireConnection]) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.head: asyncio.Future[int] | None = None
        self.raw: list[tuple[bytes, bytes]] = []
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.waiter: asyncio.Future[None] | None = None
        self.done = False  # the answer's body ended
        self.reusable = False
        self.interim = False  # a 1xx head: the real answer follows
        self.error: BaseException | None = None
        self.closed = False
        self.paused = False
        self.idle_since = 0.0  # the loop's clock when it went back to the pool
        # the loop the connection lives on, kept: on Python 3.11 each
        # `asyncio.get_running_loop()` is a getpid() syscall (its check for a fork)
        self.loop = asyncio.get_running_loop()

    # -- asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.head is None:  # idle in the pool: nothing may arrive unasked
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.reusable = False
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self in self.pool:
            self.pool.remove(self)
        if self.head is None or self.done or self.error is not None:
            return
        if self.head.done() and self._reads_to_close():
            self._finish()  # an answer without length or chunking ends with the connection
            return
        self._fail(exc)

    def pause_writing(self) -> None:  # a request body is written at once: nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools
    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.interim = True
            return
        self.reusable = self.parser.should_keep_alive()
        head = self.head
        if head is not None and not head.done():
            head.set_result(status)

    def on_body(self, body: bytes) -> None:
        if self.done:  # the body of a second answer nobody asked for
            self.reusable = False
            return
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            self.raw = []
            return
        if self.done:  # a second answer nobody asked for
            self.reusable = False
            return
        self._finish()

    # -- states
    def _reads_to_close(self) -> bool:
        names = {name.lower() for name, _ in self.raw}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _finish(self) -> None:
        self.done = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException | None) -> None:
        head = self.head
        if head is not None and not head.done():
            if isinstance(exc, httptools.HttpParserError):
                error: BaseException = UpstreamBrokenHead(f"not an HTTP answer: {exc}")
            else:
                error = aiohttp.ServerDisconnectedError()
            head.set_exception(error)
        else:
            self.error = aiohttp.ClientPayloadError(f"Response payload is not completed: {exc!r}")
        self.reusable = False
        self.close()
        self._wake()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()
        if self in self.pool:
            self.pool.remove(self)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # as aiohttp decodes header names and values


_WANTED: dict[str, bytes] = {}  # header names asked for, as the lowered bytes looked up
_NAME, _VALUE = itemgetter(0), itemgetter(1)


def _wanted(name: str) -> bytes:
    wanted = name.lower().encode("latin-1")
    if len(_WANTED) < 256:
        _WANTED[name] = wanted
    return wanted


class WireHeaders:
    """An answer's headers, looked up by lowered name: the proxy asks for two or three of
    them, where a `CIMultiDict` of them all would be built for every answer."""

    __slots__ = ("_first", "_raw")

    def __init__(self, raw: tuple[tuple[bytes, bytes], ...]) -> None:
        self._raw = raw
        # each lowered name's first value: built from the last pair to the first, so that the
        # first one of a repeated name is the one kept (all in C: no Python step a header)
        backwards = raw[::-1]
        self._first = dict(
            zip(map(bytes.lower, map(_NAME, backwards)), map(_VALUE, backwards), strict=True)
        )

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of `name` (any case), else `default`."""
        value = self._first.get(_WANTED.get(name) or _wanted(name))
        return default if value is None else _text(value)

    def __getitem__(self, name: str) -> str:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def items(self) -> list[tuple[str, str]]:
        """Every header as text, repeated names included (spelled as first received, as a
        `CIMultiDict` gives them), in the order received."""
        spelled: dict[bytes, str] = {}
        return [
            (spelled.setdefault(key.lower(), _text(key)), _text(value)) for key, value in self._raw
        ]
