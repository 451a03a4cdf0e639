"""Spans the OTel SDK's batch processor drops (its queue full) are counted, not lost silently.

A real SQLite file locked by another process keeps the exporter's worker waiting (it retries);
meanwhile more spans end than the queue (`max_queue_size = 4`) holds, and the SDK drops the
oldest. Every span is then either stored or counted in `queue_dropped`, and the log says so.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from tracecard.traces.exporter import SqlSpanExporter, StoringBatchProcessor
from tracecard.traces.store import Store

HOLD = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('BEGIN EXCLUSIVE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
    "c.execute('COMMIT')\n"
)


def hold_sqlite_lock(db: Path) -> subprocess.Popen[bytes]:
    """Another process holding SQLite's write lock until a line is written to its stdin."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
    return holder


def release(holder: subprocess.Popen[bytes]) -> None:
    holder.communicate(b"go\n", timeout=30)


def test_spans_dropped_by_the_full_queue_are_counted_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "queue.db"
    store = Store(f"sqlite:///{db}", busy_timeout_s=0.2)
    store.create_schema()
    exporter = SqlSpanExporter(store)  # no spool: the worker itself waits for the database
    processor = StoringBatchProcessor(
        exporter, max_queue_size=4, max_export_batch_size=4, schedule_delay_millis=20
    )
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    holder = hold_sqlite_lock(db)
    try:
        with caplog.at_level(logging.WARNING, logger="tracecard.traces.exporter"):
            for index in range(40):
                with tracer.start_as_current_span(f"call {index}") as span:
                    span.set_attribute("tracecard.run.id", "r1")
    finally:
        release(holder)
    assert processor.force_flush()
    stored = len(store.spans_for_run("r1"))
    assert processor.queue_dropped > 0 and stored + processor.queue_dropped == 40
    warnings = [r.getMessage() for r in caplog.records if "spans dropped so far" in r.getMessage()]
    assert len(warnings) == 1 and "recording.batch_max_queue = 4" in warnings[0]  # not per span
    provider.shutdown()
    store.dispose()
