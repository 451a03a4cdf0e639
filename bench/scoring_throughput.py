"""Scoring throughput on stored traces: runs rescored per second, runs of ~20 spans, on SQLite.

    .venv/bin/python bench/scoring_throughput.py [--runs 10000] [--db /tmp/tc-bench.db]

Builds one experiment of `--runs` finished runs (each: a root span and 19 `tools/call` spans
shaped like the proxy's, plus a verifier span for the outcome probe), then times
`tracecard.server.evaluation.service.rescore` over all of them — the same code `tracecard
score` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path

import orjson

from tracecard.server.evaluation.service import (
    create_experiment,
    experiment_with_runs,
    rescore,
    store_suite,
)
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

HEADER = """
schema_version = 1
name = "bench"
"""

TASK = """
[[tasks]]
id = "t{n}"
instruction = "write the note"
upstreams = ["notes"]
tools = ["write_note", "read_note", "echo"]

[tasks.invocation]
order = "subsequence"
calls = [
  { tool = "write_note", arguments = { key = { exact = "k" }, text = { regex = "^hello" } } },
  { tool = "read_note", arguments = { key = { exact = "k" } } },
]

[tasks.completion]
checks = [{ contains = "done" }]

[tasks.outcome]
probes = [{ id = "note", upstream = "notes", tool = "read_note", arguments = { key = "k" } }]
predicates = [{ probe = "note", path = "$.structuredContent.text", op = "eq", value = "hello" }]

[tasks.efficiency]
optimal_calls = 2
"""


def spans_for(run_id: str, trace_id: str, root: str, rng: random.Random) -> list[dict]:
    start = time.time_ns()
    spans = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "parent_span_id": None,
            "run_id": run_id,
            "name": "invoke_agent bench",
            "kind": 1,
            "start_time_unix_nano": start,
            "end_time_unix_nano": start + 10**9,
            "status": {"code": 0, "message": None},
            "attributes": {"tracecard.run.id": run_id},
            "events": [],
        }
    ]
    for i in range(19):
        tool = rng.choice(["write_note", "read_note", "echo"])
        arguments = {"key": "k", "text": "hello"} if tool == "write_note" else {"key": "k"}
        spans.append(
            {
                "trace_id": trace_id,
                "span_id": os.urandom(8).hex(),
                "parent_span_id": root,
                "run_id": run_id,
                "name": f"tools/call {tool}",
                "kind": 3,
                "start_time_unix_nano": start + i * 1000,
                "end_time_unix_nano": start + i * 1000 + 500,
                "status": {"code": 0, "message": None},
                "events": [],
                "attributes": {
                    "tracecard.run.id": run_id,
                    "tracecard.role": "agent",
                    "tracecard.upstream": "notes",
                    "mcp.method.name": "tools/call",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": orjson.dumps(arguments).decode(),
                    "gen_ai.tool.call.result": '{"content":[{"type":"text","text":"ok"}]}',
                },
            }
        )
    spans.append(
        {
            "trace_id": trace_id,
            "span_id": os.urandom(8).hex(),
            "parent_span_id": root,
            "run_id": run_id,
            "name": "tools/call read_note",
            "kind": 3,
            "start_time_unix_nano": start + 10**8,
            "end_time_unix_nano": start + 10**8 + 500,
            "status": {"code": 0, "message": None},
            "events": [],
            "attributes": {
                "tracecard.run.id": run_id,
                "tracecard.role": "verifier",
                "tracecard.probe.id": "note",
                "tracecard.probe.kind": "tool",
                "gen_ai.tool.name": "read_note",
                "tracecard.probe.value": '{"structuredContent": {"text": "hello"}}',
            },
        }
    )
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--db", default="/tmp/tracecard-bench-scoring.db")
    args = parser.parse_args()
    for suffix in ("", "-wal", "-shm"):
        Path(args.db + suffix).unlink(missing_ok=True)
    store = Store(f"sqlite:///{args.db}")
    store.create_schema()
    settings = Settings(db=store.url, upstreams={"notes": {"url": "http://127.0.0.1:9/mcp"}})
    suite = HEADER + "".join(TASK.replace("{n}", str(n)) for n in range(10))
    store_suite(store, suite, "toml", "bench suite")
    trials = max(1, args.runs // 10)
    experiment, runs = create_experiment(store, settings, "bench", {"name": "bench"}, trials)
    rng = random.Random(7)
    t0 = time.perf_counter()
    batch: list[dict] = []
    for run in runs:
        batch.extend(spans_for(run.id, run.trace_id, run.root_span_id, rng))
        if len(batch) >= 20_000:
            store.insert_spans(batch)
            batch.clear()
    store.insert_spans(batch)
    with store.writing() as session:
        from sqlalchemy import update

        from tracecard.traces.models import RunRow

        session.execute(
            update(RunRow)
            .where(RunRow.experiment_id == experiment.id)  # type: ignore[arg-type]
            .values(status="finished", final_answer="done")
        )
    load_s = time.perf_counter() - t0
    _, runs = experiment_with_runs(store, experiment.id)
    t0 = time.perf_counter()
    results = rescore(store, runs)
    elapsed = time.perf_counter() - t0
    assert len(results) == len(runs), len(results)
    args.runs = len(runs)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"loaded {args.runs} runs x 21 spans in {load_s:.1f}s")
    print(f"rescored {args.runs} runs in {elapsed:.1f}s = {args.runs / elapsed:.0f} runs/s")


if __name__ == "__main__":
    main()
