"""What recording a call costs (#24 item 3): CPU per recorded `tools/call`, from the recorder's
`start` to the span's row committed on SQLite (the real wiring: recorder, storing batch
processor, spool, SQL exporter), all threads counted (`time.process_time`).

Paired A/B in one process, rounds alternating: `row` is the recorder's path (the span ends as
the row the store keeps), `readable` ends each span the earlier way (an SDK `ReadableSpan`
handed to the processors, turned into a row by the exporter). CPU time, not wall time: the
machine's load moves it far less.

    .venv/bin/python bench/recording_cost.py [--calls 5000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracecard.server.recording.recorder import Exchange, Recorder  # noqa: E402
from tracecard.server.recording.span import RecordedSpan  # noqa: E402
from tracecard.server.runs.registry import RunInfo  # noqa: E402
from tracecard.server.runtime import make_tracer_provider  # noqa: E402
from tracecard.server.settings import Settings  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402


def _end_readable(span: RecordedSpan, end_time: int | None = None) -> None:
    """The earlier end: one ReadableSpan for every processor."""
    if span.end_ns is not None:
        return
    span.end_ns = end_time or time.time_ns()
    span._sink.processor.on_end(span.readable())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/tracecard.db")
        store.create_schema()
        settings = Settings(db=store.url)
        provider, processor = make_tracer_provider(store, settings)
        recorder = Recorder(provider.get_tracer("tracecard"), settings.recording, key=b"k" * 32)
        run = RunInfo(id="r1", trace_id="ab" * 16, root_span_id="cd" * 8)
        exchange = Exchange(run=run, upstream="tools", server_address="127.0.0.1", server_port=9)
        counter = 0

        def record(count: int) -> float:
            nonlocal counter
            start = time.process_time()
            for _ in range(count):
                counter += 1
                call = {
                    "jsonrpc": "2.0",
                    "id": counter,
                    "method": "tools/call",
                    "params": {"name": "read_file", "arguments": {"path": f"/{counter}"}},
                }
                pending = recorder.start(call, exchange)
                text = f"line {counter}"
                answer = {"content": [{"type": "text", "text": text}], "isError": False}
                recorder.finish(pending, {"jsonrpc": "2.0", "id": counter, "result": answer})
            processor.force_flush()
            return (time.process_time() - start) / count * 1e6

        record(500)
        results: dict[str, list[float]] = {"row": [], "readable": []}
        original = RecordedSpan.end
        for i in range(args.rounds):
            for name in ("row", "readable") if i % 2 == 0 else ("readable", "row"):
                RecordedSpan.end = original if name == "row" else _end_readable  # type: ignore[method-assign]
                results[name].append(record(args.calls))
        RecordedSpan.end = original  # type: ignore[method-assign]
        provider.shutdown()
        store.dispose()
    print(
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.calls} calls x "
        f"{args.rounds} rounds each, CPU us per recorded call (all threads), median (min)"
    )
    for name, values in results.items():
        print(f"{name:<9} {statistics.median(values):7.1f} ({min(values):.1f})")


if __name__ == "__main__":
    main()
