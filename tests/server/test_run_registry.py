"""The in-memory run registry the proxy resolves runs from: bounded, and backed by the store."""

from __future__ import annotations

from tracecard.server.runs.registry import RunRegistry
from tracecard.traces.store import Store


async def test_adhoc_runs_are_bounded_and_stored(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    store.create_schema()
    registry = RunRegistry(store, capacity=2)
    first = registry.adhoc("client-a")
    assert registry.adhoc("client-a") is first  # the same key keeps its run
    registry.adhoc("client-b")
    registry.adhoc("client-c")  # evicts the least recently used key, client-a
    await registry.drain()
    assert registry.adhoc("client-a") is not first  # a new ad-hoc run, not a lost one
    await registry.drain()
    stored = store.get_run(first.id)
    assert stored is not None and stored.adhoc_key == "client-a"  # nothing recorded is lost
    assert store.adhoc_run("client-c") is not None
    assert await registry.resolve(first.id) is not None  # still resolvable from the store
