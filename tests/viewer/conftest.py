"""A night of runs in a real store, served two ways: in process through Litestar's
`AsyncTestClient` (the page tests: no socket, no server thread) and by a real uvicorn (the
browser tests, which need a port Chromium can reach)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from litestar.testing import AsyncTestClient

from tests.support.tracecard import running_tracecard
from tests.viewer.data import Night, build_night
from tracecard.server.app import asgi_app
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

# The in-process client's address: a loopback Host, as the security guard requires.
IN_PROCESS_URL = "http://127.0.0.1:7800"


@dataclass
class NightStore:
    settings: Settings
    night: Night
    store: Store


@dataclass
class NightServer:
    url: str
    night: Night
    store: Store


@dataclass
class NightClient:
    """The app as served (security guard, proxy router, Litestar), called in process."""

    client: AsyncTestClient  # type: ignore[type-arg]
    night: Night
    url: str = IN_PROCESS_URL


@pytest.fixture(scope="module")
def night_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NightStore]:
    directory = tmp_path_factory.mktemp("night")
    url = f"sqlite:///{directory / 'tracecard.db'}"
    store = Store(url)
    store.create_schema()
    night = build_night(store)
    settings = Settings(
        db=url, sandbox_root=str(directory / "sandboxes"), recording={"batch_delay_ms": 50}
    )
    yield NightStore(settings=settings, night=night, store=store)
    store.dispose()


@pytest.fixture(scope="module")
def night_server(night_store: NightStore) -> Iterator[NightServer]:
    with running_tracecard(night_store.settings) as server:
        yield NightServer(url=server.url, night=night_store.night, store=night_store.store)


@pytest.fixture
async def night_client(night_store: NightStore) -> AsyncIterator[NightClient]:
    app = asgi_app(night_store.settings, night_store.store)
    async with AsyncTestClient(app, base_url=IN_PROCESS_URL) as client:
        yield NightClient(client=client, night=night_store.night)
