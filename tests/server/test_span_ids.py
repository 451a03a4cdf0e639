"""Span ids that start with the time (server/recording/span_ids.py): the clock's milliseconds
modulo 2**27, then 37 random bits; what the recorder stores carries them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tracecard.server.recording import span_ids
from tracecard.server.recording.recorder import Exchange, Recorder
from tracecard.server.recording.span_ids import RANDOM_BITS, TimeOrderedIds
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runtime import make_tracer_provider
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

PERIOD = 1 << 27


class FrozenClock:
    """Stands in for the `time` module the generator reads: `time_ns` returns `now`."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms * 1_000_000

    def time_ns(self) -> int:
        return self.now


def _prefix(span_id: int) -> int:
    return span_id >> RANDOM_BITS


def test_an_id_is_the_milliseconds_then_random_bits() -> None:
    ids = TimeOrderedIds()
    before = time.time_ns() // 1_000_000
    made = [ids.generate_span_id() for _ in range(1_000)]
    after = time.time_ns() // 1_000_000
    assert all(0 < i < 1 << 64 for i in made)
    window = {ms % PERIOD for ms in range(before, after + 1)}
    assert {_prefix(i) for i in made} <= window
    # the low bits are random: 1,000 draws of 37 bits all but never repeat
    assert len({i & ((1 << RANDOM_BITS) - 1) for i in made}) >= 990
    trace_ids = {ids.generate_trace_id() for _ in range(100)}
    assert len(trace_ids) == 100 and all(0 < t < 1 << 128 for t in trace_ids)
    assert ids.is_trace_id_random()


def test_ids_grow_with_the_clock_and_wrap_with_the_period(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FrozenClock(1_796_000_000_000)
    monkeypatch.setattr(span_ids, "time", clock)
    ids = TimeOrderedIds()
    earlier = [ids.generate_span_id() for _ in range(200)]
    clock.now += 1_000_000  # one millisecond later
    later = [ids.generate_span_id() for _ in range(200)]
    assert max(earlier) < min(later)  # a batch's ids sit together at the key's end
    assert _prefix(later[0]) == (1_796_000_000_001 % PERIOD)
    clock.now = (3 * PERIOD + 5) * 1_000_000  # the period starts again at the key's beginning
    assert _prefix(ids.generate_span_id()) == 5


def test_the_invalid_span_id_is_never_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_ids, "time", FrozenClock(4 * PERIOD))  # a period's first ms
    draws = iter([0, 0, 7])
    monkeypatch.setattr(span_ids.random, "getrandbits", lambda _bits: next(draws))
    assert TimeOrderedIds().generate_span_id() == 7


def test_a_forked_process_draws_other_random_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_ids, "time", FrozenClock(1_796_000_000_000))
    ids = TimeOrderedIds()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, written to the parent
        try:
            os.write(writer, ",".join(str(ids.generate_span_id()) for _ in range(5)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    child = {int(v) for v in os.read(reader, 4096).decode().split(",")}
    os.close(reader)
    os.waitpid(pid, 0)
    mine = {ids.generate_span_id() for _ in range(5)}
    assert len(child) == 5 and not child & mine  # one millisecond, no id in common


def test_the_recorder_stores_time_ordered_ids(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'tracecard.db'}")
    store.create_schema()
    settings = Settings(db=store.url)
    provider, processor = make_tracer_provider(store, settings)
    try:
        recorder = Recorder(provider.get_tracer("tracecard"), settings.recording, key=b"k" * 32)
        run = RunInfo(id="r1", trace_id="ab" * 16, root_span_id="cd" * 8)
        exchange = Exchange(run=run, upstream="tools", server_address="127.0.0.1", server_port=9)
        before = time.time_ns() // 1_000_000
        for i in range(50):
            call = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "t"}}
            pending = recorder.start(call, exchange)
            recorder.finish(pending, {"jsonrpc": "2.0", "id": i, "result": {"content": []}})
        after = time.time_ns() // 1_000_000
        assert processor.force_flush()
        with store.engine.connect() as connection:
            stored = [r[0] for r in connection.execute(text("select span_id from spans"))]
    finally:
        provider.shutdown()
        store.dispose()
    assert len(stored) == 50
    window = {ms % PERIOD for ms in range(before, after + 1)}
    assert {_prefix(int(s, 16)) for s in stored} <= window
