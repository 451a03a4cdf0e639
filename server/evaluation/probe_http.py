"""The HTTP connections of outcome probes: one pool for the server's lifetime.

A `tool` probe calls tracecard's own proxy over MCP (server/evaluation/hooks.py). Building an
`httpx2` client per probe (its transport, TLS context and connection pool) cost most of a
probe's time (docs/PERFORMANCE.md, probes); the pool is now built once, on the first probe, and
closed with the app (`evaluation_lifespan` in server/evaluation/feature.py). Each probe still
gets its own thin client over that pool, carrying the verifier key in its own headers: the
shared pool holds no header, so the key can never travel with anything but that probe's
requests, and closing a probe's client leaves the pool open.
"""

from __future__ import annotations

import httpx2

__all__ = ["ProbeHttp", "ProbeHttpClosed"]


class ProbeHttpClosed(RuntimeError):
    """A probe started after the server shut its probe connections (shutdown)."""


class _Borrowed(httpx2.AsyncBaseTransport):
    """The shared pool as one probe's client sees it: closing the client leaves it open."""

    def __init__(self, pool: httpx2.AsyncHTTPTransport) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._pool.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class ProbeHttp:
    """Probe clients over one connection pool, created on first use and closed at shutdown."""

    def __init__(self) -> None:
        self._pool: httpx2.AsyncHTTPTransport | None = None
        self.closed = False

    @property
    def pool(self) -> httpx2.AsyncHTTPTransport | None:
        """The shared pool (None until the first probe)."""
        return self._pool

    def client(self, headers: dict[str, str], timeout_s: float) -> httpx2.AsyncClient:
        """A client for one probe: its own headers, the shared connections."""
        if self.closed:
            raise ProbeHttpClosed("tracecard is shutting down: no probe can start")
        if self._pool is None:
            self._pool = httpx2.AsyncHTTPTransport(trust_env=False)
        return httpx2.AsyncClient(
            transport=_Borrowed(self._pool),
            headers=headers,
            timeout=timeout_s,
            trust_env=False,
        )

    async def aclose(self) -> None:
        self.closed = True
        if self._pool is not None:
            await self._pool.aclose()
