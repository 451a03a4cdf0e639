"""A real tracecard serving a night of runs, shared by the page and browser tests of a module."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.tracecard import running_tracecard
from tests.viewer.data import Night, build_night
from tracecard.server.settings import Settings
from tracecard.traces.store import Store


@dataclass
class NightServer:
    url: str
    night: Night
    store: Store


@pytest.fixture(scope="module")
def night_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NightServer]:
    directory = tmp_path_factory.mktemp("night")
    url = f"sqlite:///{directory / 'tracecard.db'}"
    store = Store(url)
    store.create_schema()
    night = build_night(store)
    settings = Settings(
        db=url, sandbox_root=str(directory / "sandboxes"), recording={"batch_delay_ms": 50}
    )
    with running_tracecard(settings) as server:
        yield NightServer(url=server.url, night=night, store=store)
    store.dispose()
