"""The exporter's durable spool: logged before storing, delivered after a crash (real SIGKILL,
real SQLite and PostgreSQL), kept while the database is locked."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider

from tests.traces.test_store_faults import _hold_lock
from tracecard.traces.exporter import SqlSpanExporter, StoringBatchProcessor
from tracecard.traces.spool import Spool
from tracecard.traces.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _spans(n: int, run: str = "r1", first: int = 0) -> list[dict[str, object]]:
    return [
        {
            "trace_id": "ab" * 16,
            "span_id": f"{i + 1:016x}",
            "name": f"s{i}",
            "start_time_unix_nano": i,
            "attributes": {"tracecard.run.id": run},
        }
        for i in range(first, first + n)
    ]


def _record(provider: TracerProvider, count: int, run: str = "r1") -> None:
    tracer = provider.get_tracer("test")
    for index in range(count):
        with tracer.start_as_current_span(f"call {index}", attributes={"tracecard.run.id": run}):
            pass


def _segments(spool_file: Path) -> list[Path]:
    return sorted(spool_file.parent.glob("spans.*.*.jsonl"))


def test_logged_then_stored_then_released(store: Store, tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "spans.jsonl")
    exporter = SqlSpanExporter(store, spool)
    provider = TracerProvider(shutdown_on_exit=False)
    processor = StoringBatchProcessor(exporter, schedule_delay_millis=50)
    provider.add_span_processor(processor)
    _record(provider, 30)
    assert processor.force_flush()  # a flush means committed, not only handed over
    assert len(store.spans_for_run("r1")) == 30
    assert exporter.stats.spooled == 30 and exporter.stats.stored == 30
    provider.shutdown()
    assert _segments(spool.path) == []  # nothing outstanding is left on disk
    assert not spool.pending()


@pytest.mark.parametrize("fsync", [True, False])
def test_a_live_process_segment_is_not_taken_a_dead_one_is(tmp_path: Path, fsync: bool) -> None:
    """Without fsync too: a batch in the kernel's page cache outlives a SIGKILL."""
    path = tmp_path / "spans.jsonl"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tracecard.traces.spool import Spool\n"
        f"spool = Spool(Path(sys.argv[1]), fsync={fsync})\n"
        "spool.log([{'span_id': f'{i:016x}', 'n': i} for i in range(1, 6)])\n"
        "print('logged', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"logged"
        got: list[dict[str, object]] = []
        reader = Spool(path)
        assert reader.deliver(lambda b: got.extend(b) or True) == 0  # held by a live process
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert reader.deliver(lambda b: got.extend(b) or True) == 5
        assert [s["n"] for s in got] == [1, 2, 3, 4, 5]
        assert _segments(path) == [] and not reader.pending()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


def test_a_failed_send_keeps_the_rest(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spans.jsonl")
    spool.append(_spans(1200))  # the shared file (what tracecard wrap uses)
    calls: list[int] = []

    def send_twice(batch: list[dict[str, object]]) -> bool:
        calls.append(len(batch))
        return len(calls) < 2

    assert spool.deliver(send_twice) == 512
    assert spool.pending()
    rest: list[dict[str, object]] = []
    assert spool.deliver(lambda b: rest.extend(b) or True) == 1200 - 512
    assert rest[0]["name"] == "s512" and not spool.pending()


@contextlib.contextmanager
def _database_locked(db_url: str) -> Iterator[None]:
    """Another process holds the spans table: SQLite's write lock, or a PostgreSQL table lock."""
    if db_url.startswith("sqlite"):
        holder = _hold_lock(Path(db_url.removeprefix("sqlite:///")), 120)
        try:
            yield
        finally:
            holder.kill()
            holder.wait(10)
        return
    with psycopg.connect(db_url) as conn:
        conn.execute("LOCK TABLE spans IN ACCESS EXCLUSIVE MODE")
        yield
        conn.rollback()


def test_sigkill_after_spooling_loses_nothing_the_next_start_delivers(
    db_url: str, tmp_path: Path
) -> None:
    """A real process records spans while the database is locked by another, is killed with
    SIGKILL; a new exporter on the same spool stores every one of them."""
    spool_file = tmp_path / "spool" / "spans.jsonl"
    Store(db_url).create_schema()
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tracecard.traces.exporter import SqlSpanExporter, StoringBatchProcessor\n"
        "from tracecard.traces.spool import Spool\n"
        "from tracecard.traces.store import Store\n"
        "store = Store(sys.argv[1], busy_timeout_s=0.1)\n"
        "exporter = SqlSpanExporter(store, Spool(Path(sys.argv[2])))\n"
        "processor = StoringBatchProcessor(exporter, schedule_delay_millis=20)\n"
        "provider = TracerProvider(shutdown_on_exit=False)\n"
        "provider.add_span_processor(processor)\n"
        "tracer = provider.get_tracer('t')\n"
        "for i in range(40):\n"
        "    attributes = {'tracecard.run.id': 'rk'}\n"
        "    with tracer.start_as_current_span(f'killed {i}', attributes=attributes):\n"
        "        pass\n"
        "# every span handed to the exporter; the database never answers, so this times out\n"
        "assert not processor.force_flush(timeout_millis=200)\n"
        "print('spooled', exporter.stats.spooled, flush=True)\n"
        "time.sleep(60)\n"
    )
    with _database_locked(db_url):
        child = subprocess.Popen(
            [sys.executable, "-c", code, db_url, str(spool_file)],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().split() == [b"spooled", b"40"]
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
    store = Store(db_url)
    assert store.spans_for_run("rk") == []  # the killed process stored nothing
    exporter = SqlSpanExporter(store, Spool(spool_file))
    assert exporter.force_flush(30000)
    assert exporter.stats.recovered == 40
    assert sorted(s["name"] for s in store.spans_for_run("rk")) == sorted(
        f"killed {i}" for i in range(40)
    )
    exporter.shutdown()
    assert _segments(spool_file) == []
    store.dispose()


def test_locked_at_shutdown_stays_spooled_and_is_delivered_next_start(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    store = Store(f"sqlite:///{db}", busy_timeout_s=0.1)
    store.create_schema()
    store.dispose()
    spool_file = tmp_path / "spool" / "spans.jsonl"
    holder = _hold_lock(db, 4.0)
    try:
        exporter = SqlSpanExporter(store, Spool(spool_file))
        provider = TracerProvider(shutdown_on_exit=False)
        processor = StoringBatchProcessor(exporter, schedule_delay_millis=20)
        provider.add_span_processor(processor)
        _record(provider, 25, run="rl")
        assert not processor.force_flush(timeout_millis=300)  # handed over, not stored
        exporter.shutdown(timeout_millis=300)  # gives up waiting: they stay in the spool
        assert exporter.stats.left_in_spool == 25 and exporter.stats.lost == 0
        assert store.health.busy_retries >= 1
    finally:
        holder.wait(10)
    assert Spool(spool_file).pending()
    restarted = SqlSpanExporter(store, Spool(spool_file))
    assert restarted.force_flush(30000) and restarted.stats.recovered == 25
    assert len(store.spans_for_run("rl")) == 25
    restarted.shutdown()
    store.dispose()


@pytest.mark.parametrize("fsync", [True, False])
def test_fsync_is_the_spools_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    spool = Spool(tmp_path / "spans.jsonl", fsync=fsync)
    spool.log(_spans(3))
    spool.log(_spans(2, first=3))
    assert len(synced) == (2 if fsync else 0)
    got: list[dict[str, object]] = []
    spool.close()  # as at a crash: both batches are outstanding, and on disk
    assert Spool(spool.path).deliver(lambda b: got.extend(b) or True) == 5
    assert [s["name"] for s in got] == ["s0", "s1", "s2", "s3", "s4"]
    spool.append(_spans(1))  # the shared file (`tracecard wrap`'s) is fsync'd either way
    assert len(synced) == (3 if fsync else 1)
