"""Watching a proxied stream (server/proxy/stream_watch.py `StreamWatch`, server/draining.py): the
agent's hang-up and the server's drain end a stream that lasts; a short stream costs a timer,
a longer one a single task, and a drain is a callback of `Runtime.draining`."""

from __future__ import annotations

import asyncio
from typing import Any

from tracecard.server.draining import DrainEvent
from tracecard.server.proxy.stream_watch import DISCONNECTED, DRAINING, WATCH_AFTER_S, StreamWatch


class Owed:
    """Stands in for a stream's `Calls`: the requests it still owes an answer to."""

    def __init__(self, *ids: int) -> None:
        self.requests = dict.fromkeys(ids)


class Agent:
    """An ASGI `receive` whose agent hangs up when told to."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def _stream(
    agent: Agent, calls: Owed | None, draining: DrainEvent | None, seconds: float
) -> tuple[str, str | None]:
    """A stream that lasts `seconds` unless its watch ends it: (how it ended, `fired()`)."""
    watch = StreamWatch(agent.receive, calls, draining)  # type: ignore[arg-type]
    try:
        await asyncio.sleep(seconds)
        return "ended", watch.fired()
    except asyncio.CancelledError:
        asyncio.current_task().uncancel()  # type: ignore[union-attr]
        return "cancelled", watch.fired()
    finally:
        watch.cancel()


def test_the_agent_hanging_up_ends_a_stream_that_lasts() -> None:
    async def main() -> tuple[str, str | None]:
        agent = Agent()
        stream = asyncio.ensure_future(_stream(agent, None, None, 30))
        await asyncio.sleep(WATCH_AFTER_S * 3)
        agent.gone.set()
        return await asyncio.wait_for(stream, 5)

    assert asyncio.run(main()) == ("cancelled", DISCONNECTED)


def test_a_drain_ends_a_stream_once_it_owes_no_answer() -> None:
    async def main() -> tuple[tuple[str, str | None], bool]:
        draining, calls = DrainEvent(), Owed(7)
        stream = asyncio.ensure_future(_stream(Agent(), calls, draining, 30))  # type: ignore[arg-type]
        await asyncio.sleep(WATCH_AFTER_S * 3)
        draining.set()
        await asyncio.sleep(0.3)
        still_open = not stream.done()  # request 7 is owed its answer: the stream goes on
        calls.requests.clear()  # answered
        return await asyncio.wait_for(stream, 5), still_open

    ended, still_open = asyncio.run(main())
    assert still_open and ended == ("cancelled", DRAINING)


def test_a_stream_started_while_draining_ends_at_once() -> None:
    async def main() -> tuple[str, str | None]:
        draining = DrainEvent()
        draining.set()
        return await asyncio.wait_for(_stream(Agent(), None, draining, 30), 5)

    assert asyncio.run(main()) == ("cancelled", DRAINING)


def test_a_short_stream_starts_no_task_and_a_long_one_one() -> None:
    async def main() -> tuple[int, int, int]:
        draining = DrainEvent()
        tasks: list[str] = []
        loop = asyncio.get_running_loop()

        def counted(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> Any:
            tasks.append(coro.__qualname__)
            return asyncio.Task(coro, loop=loop, **options)

        loop.set_task_factory(counted)
        outer = len(tasks)
        await _stream(Agent(), Owed(), draining, 0)  # over within a loop turn
        short = len(tasks) - outer
        await _stream(Agent(), Owed(), draining, WATCH_AFTER_S * 3)
        long = len(tasks) - outer - short
        return short, long, len(draining._callbacks)

    short, long, left = asyncio.run(main())
    assert (short, long) == (0, 1)  # the agent's hang-up only; the drain is a callback
    assert left == 0  # a stream that ended is forgotten by the drain event


def test_the_drain_event_calls_back_once_and_still_wakes_waiters() -> None:
    async def main() -> tuple[list[str], bool]:
        draining = DrainEvent()
        called: list[str] = []
        draining.on_set(lambda: called.append("a"))
        forgotten = lambda: called.append("b")  # noqa: E731
        draining.on_set(forgotten)
        draining.discard(forgotten)
        waiter = asyncio.ensure_future(draining.wait())
        await asyncio.sleep(0)
        draining.set()
        draining.set()  # again: no second call
        draining.on_set(lambda: called.append("late"))  # already set: at once
        return called, await asyncio.wait_for(waiter, 5)

    called, woke = asyncio.run(main())
    assert called == ["a", "late"] and woke is True
