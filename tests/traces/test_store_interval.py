"""The spool's writer commits at most once per `store_every_s`: batches that come within the
interval go into one transaction, a flush or a shutdown never waits it out, a batch after a
quiet interval is stored at once, and a SIGKILL meanwhile loses nothing that was spooled (real
SQLite, a real child process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.traces.test_spool import _spans
from tracecard.traces.exporter import SqlSpanExporter
from tracecard.traces.spool import Spool
from tracecard.traces.store import Store

ROOT = Path(__file__).resolve().parents[2]
LONG = 30.0  # an interval no step of these tests waits out


class _Counting:
    """The store's transactions of spans, as the writer makes them (the store stays real)."""

    def __init__(self, store: Store) -> None:
        self.sizes: list[int] = []
        self._insert = store.insert_spans
        store.insert_spans = self.insert  # type: ignore[method-assign]

    def insert(self, spans: Any, keep_trying: Any = None) -> int:
        batch = list(spans)
        self.sizes.append(len(batch))
        return self._insert(batch, keep_trying=keep_trying)


def _stored(store: Store, run: str = "r1") -> int:
    return len(store.spans_for_run(run))


def _eventually(check: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_batches_within_the_interval_share_one_transaction(store: Store, tmp_path: Path) -> None:
    counting = _Counting(store)
    exporter = SqlSpanExporter(store, Spool(tmp_path / "spans.jsonl"), store_every_s=LONG)
    try:
        exporter.export(_spans(5))  # the first batch after a quiet interval: stored at once
        assert _eventually(lambda: _stored(store) == 5)
        for first in (5, 10, 15):  # these wait for the rest of the interval, together
            exporter.export(_spans(5, first=first))
        time.sleep(0.3)
        assert _stored(store) == 5  # not stored yet: the interval has not passed
        assert exporter.force_flush(timeout_millis=10_000)  # a flush does not wait it out
        assert _stored(store) == 20
        assert counting.sizes == [5, 15]  # three batches, one transaction
        assert exporter.stats.stored == 20
    finally:
        exporter.shutdown(timeout_millis=10_000)
    assert not list(tmp_path.glob("spans.*.*.jsonl"))  # every batch released from the spool


def test_no_interval_stores_each_batch(store: Store, tmp_path: Path) -> None:
    counting = _Counting(store)
    exporter = SqlSpanExporter(store, Spool(tmp_path / "spans.jsonl"), store_every_s=0)
    try:
        for first in (0, 5, 10):
            exporter.export(_spans(5, first=first))
            assert exporter.force_flush(timeout_millis=10_000)
        assert counting.sizes == [5, 5, 5]
    finally:
        exporter.shutdown(timeout_millis=10_000)


def test_shutdown_stores_what_waits_for_the_interval(store: Store, tmp_path: Path) -> None:
    exporter = SqlSpanExporter(store, Spool(tmp_path / "spans.jsonl"), store_every_s=LONG)
    exporter.export(_spans(3))
    assert _eventually(lambda: _stored(store) == 3)
    exporter.export(_spans(3, first=3))  # waits for the interval
    exporter.shutdown(timeout_millis=10_000)
    assert _stored(store) == 6
    assert exporter.stats.left_in_spool == 0
    assert not list(tmp_path.glob("spans.*.*.jsonl"))


def test_sigkill_while_a_batch_waits_loses_nothing_spooled(store: Store, tmp_path: Path) -> None:
    """A child spools two batches (the second waits for the interval) and is killed; the next
    exporter on the same spool delivers what was not committed."""
    spool_file = tmp_path / "spool" / "spans.jsonl"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tracecard.traces.exporter import SqlSpanExporter\n"
        "from tracecard.traces.spool import Spool\n"
        "from tracecard.traces.store import Store\n"
        "from tests.traces.test_spool import _spans\n"
        "from tests.traces.test_store_interval import _eventually, _stored\n"
        "store = Store(sys.argv[1])\n"
        f"exporter = SqlSpanExporter(store, Spool(Path(sys.argv[2])), store_every_s={LONG})\n"
        "exporter.export(_spans(4))\n"
        "assert _eventually(lambda: _stored(store) == 4)\n"
        "exporter.export(_spans(4, first=4))\n"
        "print('spooled', flush=True)\n"
        "time.sleep(120)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, store.url, str(spool_file)], stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"spooled"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert _stored(store) == 4  # the second batch was spooled, not committed
    restarted = SqlSpanExporter(store, Spool(spool_file))
    try:
        assert restarted.force_flush(timeout_millis=30_000)
        assert _stored(store) == 8
        # the dead process's segment is delivered whole (its stored first batch again, which
        # the store skips by span id): 8 sent, 8 stored
        assert restarted.stats.recovered == 8
    finally:
        restarted.shutdown(timeout_millis=10_000)


def test_a_backlog_is_stored_in_bounded_transactions(
    store: Store, tmp_path: Path, monkeypatch: Any
) -> None:
    """Batches queued while the writer waited are merged up to MERGE_MAX_SPANS spans a
    transaction; the rest follow in the next ones, nothing left behind."""
    monkeypatch.setattr(SqlSpanExporter, "MERGE_MAX_SPANS", 8)
    counting = _Counting(store)
    exporter = SqlSpanExporter(store, Spool(tmp_path / "spans.jsonl"), store_every_s=LONG)
    try:
        exporter.export(_spans(5))  # stored at once; the next ones wait for the interval
        assert _eventually(lambda: _stored(store) == 5)
        for first in (5, 10, 15, 20):
            exporter.export(_spans(5, first=first))
        assert exporter.force_flush(timeout_millis=10_000)
        assert _stored(store) == 25
        # 5 at once, then 5 + 5 (8 reached), then 5 + 5
        assert counting.sizes == [5, 10, 10]
    finally:
        exporter.shutdown(timeout_millis=10_000)
    assert not list(tmp_path.glob("spans.*.*.jsonl"))
