"""What storing a recorded call costs, by how the spool and the database are set (#24): CPU per
recorded `tools/call`, all threads (`time.process_time`: user and system time, so an fsync's
kernel work counts), from the recorder's `start` to the row committed on SQLite, through the
real wiring (`make_tracer_provider`: storing batch processor, spool, SQL exporter).

Each arm has its own database and spool in a temporary folder on the disk the spool would use
(`--dir`, default the system's temporary folder); rounds alternate between the arms. A flush
every `--batch` calls cuts the batches to that size (the served proxy's batches: ~300 spans
stateless, fewer with sessions, a handful in a session's end). Arms:

- `fsync`: the spool fsyncs each batch (the default on PostgreSQL, and on SQLite before #24);
- `nofsync`: the spool writes each batch to the kernel only (the default on SQLite since #24);
- `page16k`: as `nofsync`, on a database made with 16 KiB pages.

    .venv/bin/python bench/storing_cost.py [--arms fsync,nofsync] [--calls 3000] [--batch 300]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracecard.server.recording.recorder import Exchange, Recorder  # noqa: E402
from tracecard.server.runs.registry import RunInfo  # noqa: E402
from tracecard.server.runtime import make_tracer_provider  # noqa: E402
from tracecard.server.settings import RecordingSettings, Settings  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402

ARMS: dict[str, dict[str, Any]] = {
    "fsync": {"spool_fsync": True},
    "nofsync": {"spool_fsync": False},
    "page16k": {"spool_fsync": False, "page_size": 16384},
}


class Arm:
    def __init__(self, name: str, folder: str) -> None:
        options = dict(ARMS[name])
        page_size = options.pop("page_size", None)
        path = Path(folder) / name / "tracecard.db"
        path.parent.mkdir()
        if page_size:
            with sqlite3.connect(path) as made:
                made.execute(f"PRAGMA page_size={page_size}")
                made.execute("VACUUM")
        self.store = Store(f"sqlite:///{path}")
        self.store.create_schema()
        settings = Settings(db=self.store.url, recording=RecordingSettings(**options))
        self.provider, self.processor = make_tracer_provider(self.store, settings)
        tracer = self.provider.get_tracer("tracecard")
        self.recorder = Recorder(tracer, settings.recording, key=b"k" * 32)
        run = RunInfo(id="r1", trace_id="ab" * 16, root_span_id="cd" * 8)
        self.exchange = Exchange(
            run=run, upstream="tools", server_address="127.0.0.1", server_port=9
        )
        self.counter = 0

    def record(self, count: int, batch: int) -> float:
        """CPU µs a recorded call, all threads, flushing every `batch` calls."""
        start = time.process_time()
        for index in range(count):
            self.counter += 1
            call = {
                "jsonrpc": "2.0",
                "id": self.counter,
                "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": f"/{self.counter}"}},
            }
            pending = self.recorder.start(call, self.exchange)
            answer = {"content": [{"type": "text", "text": f"line {self.counter}"}]}
            self.recorder.finish(pending, {"jsonrpc": "2.0", "id": self.counter, "result": answer})
            if (index + 1) % batch == 0:
                self.processor.force_flush()
        self.processor.force_flush()
        return (time.process_time() - start) / count * 1e6

    def close(self) -> None:
        self.provider.shutdown()
        self.store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="fsync,nofsync")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--dir", default=None, help="where the databases and spools go")
    args = parser.parse_args()
    names = args.arms.split(",")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        arms = {name: Arm(name, folder) for name in names}
        for arm in arms.values():
            arm.record(500, args.batch)
        results: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            for name in order:
                results[name].append(arms[name].record(args.calls, args.batch))
        for arm in arms.values():
            arm.close()
    print(
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.calls} calls x "
        f"{args.rounds} rounds, a flush every {args.batch} calls; CPU µs a recorded call "
        "(all threads): median (min, max)"
    )
    for name, values in results.items():
        print(f"{name:<9} {statistics.median(values):7.1f} ({min(values):.1f}, {max(values):.1f})")


if __name__ == "__main__":
    main()
