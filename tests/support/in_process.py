"""tracecard served in process, for tests of the JSON API, the evaluation API, OTLP ingest and
the security guard: the app as served (security guard, proxy router, Litestar) run by Litestar's
test client, its lifespan and every request on one portal thread. No socket, no uvicorn.

Tests of the proxy, of streaming (SSE), of real network behaviour, of shutdown and signals, of
subprocesses talking HTTP to tracecard, and of a browser use `running_tracecard`
(tests/support/tracecard.py) instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from litestar.testing import TestClient
from litestar.testing.transport import TestClientTransport

from tests.support.tracecard import runtime_in
from tracecard.server.app import asgi_app
from tracecard.server.runtime import Runtime
from tracecard.server.settings import Settings
from tracecard.traces.store import Store


def in_process_url(settings: Settings) -> str:
    """The address requests carry: a loopback Host (as the guard requires) on the settings' port,
    so the run URLs the API hands out look like those of `tracecard serve`."""
    return f"http://127.0.0.1:{settings.port}"


class AppTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Litestar's test transport as an httpx transport for sync and async clients alike (both
    reach the app through the test client's portal; closing it leaves the app running)."""

    def __init__(self, client: TestClient) -> None:  # type: ignore[type-arg]
        self._app = TestClientTransport(client=client)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._app.handle_request(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self._app.handle_request(request)


@dataclass
class InProcessTracecard:
    """A started app. `client` calls it like an `httpx.Client`; `transport` hands the same app to
    other clients (`TracecardClient`, `AsyncTracecardClient`, `httpx.AsyncClient`)."""

    client: TestClient  # type: ignore[type-arg]
    settings: Settings
    url: str
    app: Any  # as served; the test client wraps it (to add ASGI state)

    @property
    def transport(self) -> AppTransport:
        return AppTransport(self.client)

    @property
    def runtime(self) -> Runtime:
        """The live runtime (store, recorder, hooks such as `enforce`)."""
        return runtime_in(self.app)

    def async_client(self, **options: Any) -> httpx.AsyncClient:
        """An `httpx.AsyncClient` on the same app, for async tests."""
        return httpx.AsyncClient(base_url=self.url, transport=self.transport, **options)


@contextlib.contextmanager
def in_process_tracecard(
    settings: Settings, store: Store | None = None
) -> Iterator[InProcessTracecard]:
    """Start the app for `settings` (sharing `store` if given) until the block ends; leaving it
    runs the lifespan's shutdown, which flushes every span, as `tracecard serve` does."""
    url = in_process_url(settings)
    app = asgi_app(settings, store)
    with TestClient(app, base_url=url) as client:
        client.follow_redirects = False  # as httpx does: a redirect is an answer to check
        yield InProcessTracecard(client=client, settings=settings, url=url, app=app)
