"""The workers' clocks play no part in what they decide together (#21.3): every instant they
compare is the database's (real SQLite and PostgreSQL). A 429's backoff: a worker whose clock is
an hour off neither ignores another worker's backoff nor stretches it, and another worker does
not misread its own. Heartbeats: a worker whose clock is two minutes off is not taken for dead,
and takes no live worker for dead. The skewed worker is this process with `datetime.now` moved
by the skew while it acts; what is asserted is each side's decision (how long it would hold,
whom it claims), never a measured time."""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tracecard.server.jobs import backoff, heartbeat
from tracecard.server.jobs.backoff import ModelBackoff
from tracecard.server.jobs.heartbeat import Heartbeat
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
    """This process acts as a worker whose clock is `seconds` off."""
    _Skewed.skew = timedelta(seconds=seconds)
    with monkeypatch.context() as patch:
        for module in (backoff, heartbeat):  # (a module that reads no clock is left as it is)
            patch.setattr(module, "datetime", _Skewed, raising=False)
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


@pytest.mark.parametrize("skew_s", [120.0, -120.0])
def test_a_skewed_worker_is_not_taken_for_dead_nor_takes_a_live_one_for_dead(
    store: Store, monkeypatch: pytest.MonkeyPatch, skew_s: float
) -> None:
    def worker(executor: str) -> Heartbeat:
        return Heartbeat(store, executor, tags=[], concurrency=1, running=lambda: 0,
                         recover=len, lost_after_s=30.0)  # fmt: skip

    with _skewed(monkeypatch, skew_s):
        skewed = worker("worker-skewed")
        skewed.beat()
    honest = worker("worker-honest")
    honest.beat()
    assert honest.recover_silent() == [], "the skewed worker was taken for dead"
    with _skewed(monkeypatch, skew_s):
        assert skewed.recover_silent() == [], "the skewed worker took a live one for dead"
        skewed.stop()  # a stopped worker is claimed at once, by one live worker
    assert honest.recover_silent() == ["worker-skewed"]
