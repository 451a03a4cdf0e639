"""`in_thread` (`tracecard.server.run_threads`): an ad-hoc run's database work in a thread of a
small pool, with anyio's guarantee kept (a cancelled caller sees the cancellation only once the
call has ended), and a pool of its own in a forked child."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time

import pytest

from tracecard.server.run_threads import in_thread


async def test_the_call_runs_in_a_pool_thread_and_returns_its_value() -> None:
    def where(value: int) -> tuple[str, int]:
        return threading.current_thread().name, value * 2

    name, doubled = await in_thread(where, 21)
    assert name.startswith("tracecard-runs") and doubled == 42
    with pytest.raises(ZeroDivisionError):
        await in_thread(lambda: 1 / 0)


async def test_a_cancelled_caller_waits_for_the_call_to_end() -> None:
    ended: list[float] = []

    def slow() -> None:
        time.sleep(0.3)
        ended.append(time.monotonic())

    caller = asyncio.create_task(in_thread(slow))
    await asyncio.sleep(0.05)
    caller.cancel()
    await asyncio.sleep(0.01)
    caller.cancel()  # cancelled twice: still not before the call ends
    with pytest.raises(asyncio.CancelledError):
        await caller
    seen = time.monotonic()
    assert ended and ended[0] <= seen  # the write it started had ended when it saw the cancel


def _in_child(results: multiprocessing.Queue[str]) -> None:
    async def call() -> str:
        return await asyncio.wait_for(in_thread(lambda: threading.current_thread().name), 10)

    results.put(asyncio.run(call()))


async def test_a_forked_child_gets_a_pool_of_its_own() -> None:
    await in_thread(lambda: None)  # the parent's pool and its thread exist
    fork = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[str] = fork.Queue()
    child = fork.Process(target=_in_child, args=(results,))
    child.start()
    child.join(20)
    assert child.exitcode == 0
    assert results.get(timeout=1).startswith("tracecard-runs")
