"""A 429's backoff does not depend on the workers' clocks (#21.3): every instant of it is the
database's (real SQLite and PostgreSQL), so a worker whose clock is an hour off neither ignores
another worker's backoff nor stretches it, and another worker does not misread its own. The
skewed worker is this process with `datetime.now` moved by the skew while it acts; the figures
asserted are the backoff each side would hold for, never a measured time."""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tracecard.server.jobs import backoff
from tracecard.server.jobs.backoff import ModelBackoff
from tracecard.server.settings import Settings
from tracecard.traces.migrate import upgrade
from tracecard.traces.store import Store

RETRY_AFTER_S = 5.0


class _Skewed(datetime):
    """`datetime` whose `now` is off by `skew`."""

    skew = timedelta(0)

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime.now(tz) + cls.skew


@contextmanager
def _skewed(monkeypatch: pytest.MonkeyPatch, seconds: float) -> Iterator[None]:
    _Skewed.skew = timedelta(seconds=seconds)
    with monkeypatch.context() as patch:
        patch.setattr(backoff, "datetime", _Skewed)
        yield


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    store = Store(db_url)
    upgrade(store)  # the migrations, as every tracecard process runs them
    yield store
    store.dispose()


@pytest.mark.parametrize("skew_s", [3600.0, -3600.0])
def test_a_skewed_worker_neither_ignores_nor_stretches_a_backoff(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch, skew_s: float
) -> None:
    limits = {name: {"concurrency": 2} for name in ("a", "b", "c")}
    settings = Settings.model_validate({"db": db_url, "limits": {"model": limits}})
    skewed, honest = ModelBackoff(store, settings), ModelBackoff(store, settings)

    def held(upstream: str) -> dict[str, float]:
        with _skewed(monkeypatch, skew_s):
            on_skewed = skewed.remaining_s(upstream)
        return {"skewed": on_skewed, "honest": honest.remaining_s(upstream)}

    # the skewed worker sees a 429 (Retry-After in seconds): both hold for it, no longer
    with _skewed(monkeypatch, skew_s):
        asyncio.run(skewed.observe("a", 429, str(RETRY_AFTER_S)))
    for side, seconds in held("a").items():
        assert 0 < seconds <= RETRY_AFTER_S, f"{side} worker holds 'a' for {seconds:.0f} s"

    # the honest worker sees one: the skewed worker holds for it too, no longer
    asyncio.run(honest.observe("b", 429, str(RETRY_AFTER_S)))
    for side, seconds in held("b").items():
        assert 0 < seconds <= RETRY_AFTER_S, f"{side} worker holds 'b' for {seconds:.0f} s"

    # Retry-After as an HTTP date, read by the skewed worker against the answer's own Date
    upstream_now = datetime.now(UTC)
    later = email.utils.format_datetime(upstream_now + timedelta(seconds=RETRY_AFTER_S), True)
    date = email.utils.format_datetime(upstream_now, usegmt=True)
    with _skewed(monkeypatch, skew_s):
        asyncio.run(skewed.observe("c", 429, later, date))
    for side, seconds in held("c").items():
        assert 0 < seconds <= RETRY_AFTER_S, f"{side} worker holds 'c' for {seconds:.0f} s"
