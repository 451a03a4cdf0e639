"""The cost of one `tool` outcome probe: runs of a one-task suite whose probe calls a tool of a
shared stdio upstream (the SDK test server) through tracecard's own proxy, finished one after
another; the probe spans' durations (p50 / p90) and the finish request's latency.

Run: .venv/bin/python bench/probe_cost.py [--runs 100]

Embedded server (uvicorn), SQLite in a temporary folder; bounded by `--runs` and a 300 s budget.
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.proxy import tracecard_for  # noqa: E402

SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "tool_server.py"), "stdio"]
SUITE = """
schema_version = 1
name = "probe-cost"

[[tasks]]
id = "note"
instruction = "Nothing to do: the probe reads a note."
upstreams = ["notes"]

[tasks.outcome]
probes = [
  { id = "note", kind = "tool", upstream = "notes", tool = "read_note", arguments = { key = "k" } },
]
predicates = [{ probe = "note", path = "$.structuredContent.key", op = "eq", value = "k" }]
"""
BUDGET_S = 300.0


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        finishes: list[float] = []
        with tracecard_for({"notes": {"command": SERVER}}, Path(folder)) as running:
            with httpx.Client(base_url=running.url, timeout=60) as http:
                posted = http.post(
                    "/api/suites", content=SUITE, headers={"content-type": "application/toml"}
                )
                assert posted.status_code == 201, posted.text
                deadline = time.monotonic() + BUDGET_S
                for index in range(args.runs + 1):  # the first starts the shared process
                    if time.monotonic() > deadline:
                        break
                    run = http.post(
                        "/api/runs",
                        json={"suite": "probe-cost", "task_id": "note", "config": {"name": "b"}},
                    ).json()
                    started = time.perf_counter()
                    done = http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "-"})
                    assert done.status_code == 200, done.text
                    if index:
                        finishes.append((time.perf_counter() - started) * 1000)
        with sqlite3.connect(Path(folder) / "tracecard.db") as con:
            rows = con.execute("select start_ns, end_ns, attributes from spans").fetchall()
        probes = [
            ((end or start) - start) / 1e6
            for start, end, attributes in rows
            if "tracecard.probe.id" in json.loads(attributes)
        ]
    print(json.dumps({"probe_span": _stats(probes[1:]), "finish": _stats(finishes)}, indent=2))


if __name__ == "__main__":
    main()
