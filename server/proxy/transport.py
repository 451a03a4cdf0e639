"""The proxy's upstream client: aiohttp's client, called directly.

httpx over the `httpx_aiohttp` transport cost ~0.15 ms of CPU per call above aiohttp alone
(an `httpx.Request`, three `Headers` objects, four send frames, a Response<->stream reference
cycle per call, every header turned bytes -> str -> bytes twice). Here a request's headers are
the agent's, decoded once (aiohttp writes `str` headers); the answer's head is aiohttp's raw
`(bytes, bytes)` pairs, handed to ASGI as they are.

Deadlines are the caller's (one `asyncio.timeout_at` per call); the client bounds the connect.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

from tracecard.server.proxy.wire import (
    WIRE_METHODS,
    UpstreamConnectTimeout,
    WireClient,
    WireResponse,
)

__all__ = [
    "Answer",
    "UpstreamClient",
    "UpstreamConnectTimeout",
    "UpstreamResponse",
    "make_proxy_client",
]

# aiohttp adds these unless told not to; the proxy forwards only what the agent sent.
_SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")


class UpstreamResponse:
    """An upstream's answer once its head has arrived: read the body with `read_chunk` or
    `aiter_raw` (never decoded), then `aclose` (the connection goes back to the pool only when
    the body was read to its end)."""

    __slots__ = ("_response", "headers", "raw_headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code: int = response.status
        self.headers: CIMultiDictProxy[str] = response.headers  # case-insensitive lookups
        self.raw_headers: tuple[tuple[bytes, bytes], ...] = response.raw_headers  # as received

    async def read_chunk(self) -> bytes:
        """The next bytes of the body as they arrived; b"" at its end."""
        return await self._response.content.readany()

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes, chunk by chunk as they arrive."""
        content = self._response.content
        while chunk := await content.readany():
            yield chunk

    def items(self) -> list[tuple[str, str]]:
        """Every header as text, repeated names included, in the order received."""
        return list(self.headers.items())

    async def aclose(self) -> None:
        """Done with the answer: a body read to its end returns the connection to the pool."""
        self._response.release()

    def take_whole(self, limit: int) -> bytes | None:
        """The whole body if it has all arrived (at most `limit` bytes), the answer then
        closed; None: read it with `read_chunk`. (Not known here: always None.)"""
        return None


Answer = UpstreamResponse | WireResponse  # an answer's head, from aiohttp or a wire connection


class UpstreamClient:
    """One aiohttp session for every upstream: no redirects, no environment, no cookies, no
    added headers, no decompression (bytes pass through as the upstream sent them)."""

    def __init__(self, max_connections: int = 512, connect_timeout: float = 10.0) -> None:
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
        self._session: aiohttp.ClientSession | None = None
        self._wire: WireClient | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        """Made on first use, inside the running event loop."""
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=self._max_connections, limit_per_host=0, ttl_dns_cache=300
            ),
            timeout=self._timeout,
            auto_decompress=False,
            skip_auto_headers=_SKIP_AUTO_HEADERS,
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # never mix one agent's cookies into another's
        )
        return self._session

    async def open(
        self, method: str, url: URL, headers: list[tuple[str, str]], body: bytes
    ) -> UpstreamResponse:
        """Send the request as it is and return once the answer's head has arrived.

        Raises aiohttp's errors (`aiohttp.ClientError`, `OSError`); a connect that timed out
        is `UpstreamConnectTimeout`, so that only the caller's deadline is a `TimeoutError`.
        """
        session = self._session or self._open_session()
        try:
            response = await session.request(
                method, url, headers=headers, data=body or None, allow_redirects=False
            )
        except aiohttp.ServerTimeoutError as exc:
            raise UpstreamConnectTimeout(str(exc)) from exc
        return UpstreamResponse(response)

    def request(
        self,
        method: str,
        url: URL,
        headers: list[tuple[str, str]],
        body: bytes,
        deadline: float | None = None,
    ) -> Coroutine[Any, Any, Answer]:
        """`open`, on a keep-alive connection of `server/proxy/wire.py` for the MCP proxy's
        methods to an `http://` upstream (the same answers and errors, less CPU per call).
        `TimeoutError` if the answer's head has not come by `deadline` (the loop's clock).
        The client's coroutine itself, to await (no frame of its own between)."""
        if url.scheme != "http" or method not in WIRE_METHODS:
            return self._open_by(deadline, method, url, headers, body)
        wire = self._wire
        if wire is None:
            wire = self._wire = WireClient(self._max_connections, self._timeout.sock_connect or 0)
        return wire.open(method, url, headers, body, deadline)

    async def _open_by(
        self,
        deadline: float | None,
        method: str,
        url: URL,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> UpstreamResponse:
        async with asyncio.timeout_at(deadline):
            return await self.open(method, url, headers, body)

    async def aclose(self) -> None:
        if self._wire is not None:
            await self._wire.aclose()
            self._wire = None
        if self._session is not None:
            await self._session.close()
            self._session = None


def make_proxy_client(max_connections: int = 512, connect_timeout: float = 10.0) -> UpstreamClient:
    """The upstream client: no redirects, no environment, no cookies; deadlines are the caller's."""
    return UpstreamClient(max_connections, connect_timeout)
