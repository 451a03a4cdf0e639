"""Benchmark (not a test): the trace page's outline query on a trace of the agent's own spans.

`bench/viewer_render.py` measures a trace of proxy spans (they have a role, so the outline never
reads their attributes). Here every span is role-less, as an OTLP-instrumented agent's own spans
are, with 10 B to 3 KB of messages; half are `execute_tool` spans stored as agent-reported, whose
`tracecard.evidence` the outline reads so the waterfall can mark them. SQLite, in process.

    .venv/bin/python bench/trace_outline.py [--spans 5000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracecard.traces import queries  # noqa: E402
from tracecard.traces import semconv as sc  # noqa: E402
from tracecard.traces.models import RunRow  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="tracecard-bench-outline-")
    store = Store(f"sqlite:///{folder}/bench.db")
    store.create_schema()
    run = RunRow(
        id="r" * 16, experiment_id="e" * 16, task_id="t", trial=0, trace_id="a" * 32,
        root_span_id="b" * 16, status="finished",
    )  # fmt: skip
    store.add_run(run)
    rng = random.Random(1)
    spans = []
    for n in range(args.spans):
        attributes: dict[str, object] = {"gen_ai.input.messages": "x" * rng.randint(10, 3000)}
        if n % 2:
            attributes |= {
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: "add",
                sc.EVIDENCE: sc.EVIDENCE_AGENT_REPORTED,
            }
        else:
            attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_CHAT
        spans.append(
            {
                "trace_id": run.trace_id, "span_id": f"{n:016x}",
                "parent_span_id": run.root_span_id, "name": "agent span", "kind": 1,
                "start_time_unix_nano": n, "end_time_unix_nano": n + 1, "status": {"code": 0},
                "attributes": attributes, "resource": {"service.name": "agent"},
            }
        )  # fmt: skip
    for start in range(0, len(spans), 500):
        store.insert_spans(spans[start : start + 500])
    times = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        outline = queries.trace_outline(store, run)
        times.append((time.perf_counter() - began) * 1000)
    marked = sum(sc.EVIDENCE in s["attributes"] for s in outline)
    times.sort()
    result = {
        "spans": len(outline),
        "agent_reported_marked": marked,
        "p50_ms": round(statistics.median(times), 1),
        "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    store.dispose()


if __name__ == "__main__":
    main()
