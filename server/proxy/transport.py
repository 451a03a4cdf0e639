"""The proxy's upstream client: the httpx API over a lean aiohttp transport.

`httpx_aiohttp.AiohttpTransport` costs about 3x raw aiohttp per call (it hands aiohttp an
`httpx.Headers`, re-parses the URL and builds a timeout per call, and aiohttp adds its own
headers); this transport hands aiohttp plain header tuples, caches URLs and timeouts, never
decompresses and never adds a header. `client.send(request, stream=True)` + `aiter_raw()`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx
from yarl import URL

# aiohttp adds these unless told not to; the proxy forwards only what the agent sent.
_SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
_HTTP11 = {"http_version": b"HTTP/1.1"}
WHOLE_BODY_MAX = 256 * 1024  # bodies up to this size (declared) are read in one piece
_CACHE_MAX = 1024  # URLs and timeouts remembered (upstream URLs are few; queries vary)


def _map_error(exc: Exception) -> httpx.TransportError:
    """aiohttp's failure as the httpx exception a caller of httpx expects."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(text)
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return httpx.ReadTimeout(text)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(text)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(text)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(text)
    return httpx.ReadError(text)


_AIOHTTP_ERRORS = (aiohttp.ClientError, OSError)


class _Body(httpx.AsyncByteStream):
    """The response body exactly as the upstream sent it, chunk by chunk as it arrives."""

    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        response = self._response
        try:
            length = response.content_length
            if length is not None and length <= WHOLE_BODY_MAX:
                yield await response.read()  # one await instead of a loop for small bodies
                return
            async for chunk in response.content.iter_any():
                yield chunk
        except _AIOHTTP_ERRORS as exc:
            raise _map_error(exc) from exc

    async def aclose(self) -> None:
        # a body read to the end returns its connection to the pool; any other is dropped
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


async def _request_body(stream: httpx.AsyncByteStream) -> AsyncIterator[bytes]:
    async for chunk in stream:
        yield chunk


class LeanAiohttpTransport(httpx.AsyncBaseTransport):
    """httpx's transport interface over one aiohttp session, opened on first use."""

    def __init__(self, max_connections: int = 512) -> None:
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}
        self._timeouts: dict[tuple[Any, ...], aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, limit_per_host=0, ttl_dns_cache=300
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # bytes pass through exactly as the upstream sent them
            skip_auto_headers=_SKIP_AUTO_HEADERS,
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # never mix one agent's cookies into another's
        )
        return self._session

    def _url(self, url: httpx.URL) -> URL:
        text = str(url)
        found = self._urls.get(text)
        if found is None:
            if len(self._urls) >= _CACHE_MAX:
                self._urls.clear()
            found = self._urls[text] = URL(text, encoded=True)  # httpx already percent-encoded
        return found

    def _timeout(self, timeouts: dict[str, float | None]) -> aiohttp.ClientTimeout:
        key = (timeouts.get("connect"), timeouts.get("read"), timeouts.get("pool"))
        found = self._timeouts.get(key)
        if found is None:
            if len(self._timeouts) >= _CACHE_MAX:
                self._timeouts.clear()
            found = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, connect=key[2], sock_connect=key[0], sock_read=key[1]
            )
        return found

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` as it is; the response streams (read it with `aiter_raw()`)."""
        session = self._session or self._open()
        stream = request.stream
        data: Any = (
            request.content  # bytes given to httpx.Request: already read
            if isinstance(stream, httpx.ByteStream)
            else _request_body(stream)  # type: ignore[arg-type]
        )
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        try:
            response = await session.request(
                request.method,
                self._url(request.url),
                data=data or None,
                headers=headers,
                allow_redirects=False,
                timeout=self._timeout(request.extensions.get("timeout", {})),
            )
        except _AIOHTTP_ERRORS as exc:
            raise _map_error(exc) from exc
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response),
            request=request,
            extensions=_HTTP11,
        )

    async def aclose(self) -> None:
        """Close the aiohttp session and its connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None


class _NoCookies(httpx.Cookies):
    """A cookie store that keeps nothing: a proxy must not mix agents' cookies (or grow)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class ProxyClient(httpx.AsyncClient):
    """`httpx.AsyncClient` that never stores cookies (and skips their per-call parsing)."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        return None


_NO_COOKIES = _NoCookies()


def make_proxy_client(
    connect_timeout: float = 10.0,
    transport_factory: Callable[[], httpx.AsyncBaseTransport] = LeanAiohttpTransport,
) -> httpx.AsyncClient:
    """The upstream client: no redirects, no environment, no cookies; deadlines are the caller's."""
    return ProxyClient(
        transport=transport_factory(),
        timeout=httpx.Timeout(None, connect=connect_timeout),
        follow_redirects=False,
        trust_env=False,
    )
