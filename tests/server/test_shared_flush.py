"""Flushes asked for at once share one (`tracecard.server.shared_flush`), and none returns
before a flush that started after it was asked for: what a caller recorded before asking is
stored when it returns. The flush here is a stand-in that counts and can be held."""

from __future__ import annotations

import asyncio

import pytest

from tracecard.server.shared_flush import SharedFlush


class Flushes:
    """A flush that records when each one started, held open until `release`."""

    def __init__(self) -> None:
        self.started: list[int] = []  # the value of `self.recorded` when each flush started
        self.recorded = 0  # what callers have "recorded" so far
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self) -> None:
        self.started.append(self.recorded)
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail


async def _caller(shared: SharedFlush, flushes: Flushes, covered: list[bool]) -> None:
    flushes.recorded += 1
    mine = flushes.recorded
    await shared()
    # some flush that covered this caller's record has finished
    covered.append(any(seen >= mine for seen in flushes.started))


async def test_a_burst_shares_two_flushes_and_every_caller_is_covered() -> None:
    flushes = Flushes()
    shared = SharedFlush(flushes)
    covered: list[bool] = []
    first = asyncio.create_task(_caller(shared, flushes, covered))
    await asyncio.sleep(0)  # the first flush runs (held)
    burst = [asyncio.create_task(_caller(shared, flushes, covered)) for _ in range(31)]
    await asyncio.sleep(0)
    assert flushes.started == [1]  # the burst waits for the next one: the first took a snapshot
    flushes.gate.set()
    await asyncio.gather(first, *burst)
    assert flushes.started == [1, 32]  # two flushes for 32 callers
    assert covered == [True] * 32


async def test_a_caller_after_the_flushes_ended_starts_a_new_one() -> None:
    flushes = Flushes()
    flushes.gate.set()
    shared = SharedFlush(flushes)
    covered: list[bool] = []
    await _caller(shared, flushes, covered)
    await _caller(shared, flushes, covered)
    assert flushes.started == [1, 2] and covered == [True, True]


async def test_a_failed_flush_fails_its_callers_and_the_next_one_runs() -> None:
    flushes = Flushes()
    flushes.fail = RuntimeError("database is locked")
    shared = SharedFlush(flushes)
    waiting = [asyncio.create_task(shared()) for _ in range(3)]
    await asyncio.sleep(0)
    flushes.gate.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert [str(r) for r in results] == ["database is locked"] * 3
    flushes.fail = None
    await shared()
    assert len(flushes.started) == 3  # the first, the one the other two shared, a new one


async def test_a_cancelled_caller_does_not_stop_the_flush_of_the_others() -> None:
    flushes = Flushes()
    shared = SharedFlush(flushes)
    first = asyncio.create_task(shared())
    await asyncio.sleep(0)  # the first flush runs (held)
    leaving, staying = asyncio.create_task(shared()), asyncio.create_task(shared())
    await asyncio.sleep(0)  # both wait for the next flush, which they share
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    flushes.gate.set()
    await asyncio.gather(first, staying)  # both flushes ran to their end
    assert len(flushes.started) == 2
