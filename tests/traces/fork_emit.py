"""Run by test_emit_after_fork.py in a fresh interpreter: a process with the storing processor
forks; the child emits a row (as the recorder does) and waits for its worker to store it; prints
what was stored."""

from __future__ import annotations

import json
import os
import sys
import time

from tracecard.traces.exporter import SqlSpanExporter, StoringBatchProcessor
from tracecard.traces.store import Store


def row(index: int) -> dict[str, object]:
    return {
        "trace_id": "ef" * 16,
        "span_id": f"{index:016x}",
        "name": f"tools/call fork{index}",
        "start_time_unix_nano": 1_000 + index,
        "end_time_unix_nano": 2_000 + index,
        "attributes": {"tracecard.run.id": "r-fork"},
    }


def main() -> None:
    store = Store(f"sqlite:///{sys.argv[1]}")
    store.create_schema()
    processor = StoringBatchProcessor(SqlSpanExporter(store), schedule_delay_millis=50)
    processor.emit_row(row(1))
    assert processor.force_flush(10_000)
    child = os.fork()
    if child == 0:  # the child: the SDK's at-fork hook gave it a worker of its own
        processor.emit_row(row(2))
        # no force_flush (it would export from this thread): the child's worker must store it
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if len(store.spans_for_run("r-fork")) == 2:
                os._exit(0)
            time.sleep(0.05)
        os._exit(3)
    _, status = os.waitpid(child, 0)
    stored = [s["span_id"] for s in Store(f"sqlite:///{sys.argv[1]}").spans_for_run("r-fork")]
    print(json.dumps({"child_exit": os.waitstatus_to_exitcode(status), "stored": stored}))


if __name__ == "__main__":
    main()
