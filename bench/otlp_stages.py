"""OTLP ingest, stage by stage: µs of CPU a span for each step the server takes, in process.

The same requests as `bench/otlp_ingest.py` (1,000 spans, 8 attributes each) go through the
server's steps one at a time on a fresh SQLite file: decode, take the wrap MACs, redact, join
(here: the run the spans name), the evidence checks, row building with the JSON columns,
`executemany` and `COMMIT` on the driver's connection. CPU time (`time.process_time`) per
stage, so a loaded machine moves it less than wall time; run it a few times, alternating with
the same file in another checkout, and compare.

The store grows with every request, and SQLite's part grows with it (the random span-id index:
each commit dirties about one index page a span once the index has more leaves than a commit has
spans); `--rounds` repeats the requests on the same file and prints each round, so the cost at
100,000 or 250,000 stored spans can be read too. The server also runs with the young-generation
GC threshold it sets at start (`server/proxy/lifespan.py`); `--server-gc` does the same here.

Run: .venv/bin/python bench/otlp_stages.py [--requests 30] [--rounds 1] [--server-gc]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--requests", type=int, default=30, help="requests of 1,000 spans")
parser.add_argument("--rounds", type=int, default=1, help="rounds on one growing file")
parser.add_argument("--server-gc", action="store_true", help="the server's GC settings")
ARGS = parser.parse_args()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from otlp_ingest import make_batch  # noqa: E402

from tracecard.server.proxy.lifespan import YOUNG_COLLECTION_EVERY  # noqa: E402
from tracecard.server.recording.ingested import distrust, redact, take_macs  # noqa: E402
from tracecard.server.recording.redaction import Redactor  # noqa: E402
from tracecard.server.settings import Settings  # noqa: E402
from tracecard.traces.otlp_ingest import decode_protobuf  # noqa: E402
from tracecard.traces.span_rows import _SPAN_COLUMNS, span_rows  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402

STAGES = ("decode", "macs", "redact", "join", "distrust", "rows", "executemany", "commit")


def main() -> None:
    if ARGS.server_gc:
        gc.freeze()
        gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    store = Store(f"sqlite:///{Path(tempfile.mkdtemp(prefix='tc-stages-')) / 'stages.db'}")
    store.create_schema()
    key = b"k" * 32
    redactor = Redactor(Settings().recording, key)
    connection = store.engine.raw_connection().driver_connection
    marks = ", ".join("?" * len(_SPAN_COLUMNS))
    sql = (
        f"INSERT INTO spans ({', '.join(_SPAN_COLUMNS)}) VALUES ({marks}) "
        "ON CONFLICT (span_id) DO NOTHING"
    )
    for number in range(ARGS.rounds):
        bodies = [make_batch("bench-run", "ab" * 16, 1000) for _ in range(ARGS.requests)]
        spent = _round(bodies, redactor, key, connection, sql)
        count = len(bodies) * 1000
        shown = " ".join(f"{name}={seconds / count * 1e6:.2f}" for name, seconds in spent.items())
        total = sum(spent.values()) / count * 1e6
        stored = f" (round {number + 1}, {(number + 1) * count:,} spans stored)"
        print(f"{ROOT.name}: {shown} total={total:.2f} (µs of CPU a span){stored}", flush=True)
    store.dispose()


def _round(
    bodies: list[bytes], redactor: Redactor, key: bytes, connection: Any, sql: str
) -> dict[str, float]:
    spent = dict.fromkeys(STAGES, 0.0)
    clock = time.process_time
    for body in bodies:
        started = clock()
        spans = decode_protobuf(body).spans
        spent["decode"] += clock() - started
        started = clock()
        macs = take_macs(spans)
        spent["macs"] += clock() - started
        started = clock()
        redact(spans, redactor)
        spent["redact"] += clock() - started
        started = clock()
        for span in spans:
            span["run_id"] = span["attributes"]["tracecard.run.id"]
        spent["join"] += clock() - started
        started = clock()
        distrust(spans, macs, key)
        spent["distrust"] += clock() - started
        started = clock()
        rows = span_rows(spans, clean=False)
        spent["rows"] += clock() - started
        started = clock()
        connection.execute("BEGIN")
        connection.executemany(sql, rows)
        spent["executemany"] += clock() - started
        started = clock()
        connection.commit()
        spent["commit"] += clock() - started
    return spent


if __name__ == "__main__":
    main()
