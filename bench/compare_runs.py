"""Benchmark (not a test): the compare-trials page (`/compare/runs`) for N trials x M calls.

Target (issue #14): under 200 ms per page for 10 trials x 300 calls. Each trial repeats a
shared plan of calls with realistic noise (a retried call, other arguments, a skipped step), so
the alignment has gaps and mismatches to place. The page is rendered through the real app
in-process (Litestar's TestClient: routing, queries, alignment, Jinja), and `align_calls` is
timed alone too. Besides wall time it reports this process's CPU time per page: on the shared
2-core machine the wall time mostly measures the other processes' load.

    .venv/bin/python bench/compare_runs.py [--trials 10] [--calls 300] [--repeat 20] [--noise 0]
        [--db postgresql://postgres@127.0.0.1:5432/EMPTY_DB]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litestar.testing import TestClient  # noqa: E402

from tracecard.server.app import create_app  # noqa: E402
from tracecard.server.settings import Settings  # noqa: E402
from tracecard.traces import semconv as sc  # noqa: E402
from tracecard.traces.models import RunRow  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402
from tracecard.viewer.align import align_calls, canonical_arguments  # noqa: E402

TOOLS = ("lookup_order", "issue_refund", "read_file", "list_directory", "get_forecast")


def trial_calls(
    plan: list[tuple[str, dict[str, Any]]], rng: random.Random, noise: float = 1.0
) -> list[Any]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for tool, arguments in plan:
        roll = rng.random() / noise if noise else 1.0
        if roll < 0.05:
            continue  # skipped
        if roll < 0.10:
            calls.append((tool, {**arguments, "retry": True}))  # a failed attempt first
        if roll < 0.15:
            arguments = {**arguments, "n": arguments["n"] + 1}  # other arguments
        calls.append((tool, arguments))
    return calls


def load(
    store: Store, trials: int, calls: int, rng: random.Random, noise: float = 1.0
) -> list[list[Any]]:
    plan = [(rng.choice(TOOLS), {"n": i, "path": f"/s/{i}.txt"}) for i in range(calls)]
    sequences = []
    t0 = 1_700_000_000 * 10**9
    for trial in range(trials):
        run_id = f"{trial:016x}"
        store.add_run(
            RunRow(
                id=run_id,
                experiment_id="e" * 16,
                task_id="long-task",
                trial=trial,
                trace_id=f"{trial:032x}",
                root_span_id=run_id,
                status="finished",
            )
        )
        spans = []
        made = trial_calls(plan, rng, noise)
        sequences.append([(tool, canonical_arguments(args)) for tool, args in made])
        for n, (tool, arguments) in enumerate(made):
            spans.append(
                {
                    "trace_id": f"{trial:032x}",
                    "span_id": f"{trial:04x}{n:012x}",
                    "parent_span_id": run_id,
                    "name": f"tools/call {tool}",
                    "kind": 3,
                    "start_time_unix_nano": t0 + n * 1_000_000,
                    "end_time_unix_nano": t0 + n * 1_000_000 + 500_000,
                    "status": {"code": 0},
                    "attributes": {
                        sc.RUN_ID: run_id,
                        sc.ROLE: sc.ROLE_AGENT,
                        sc.MCP_METHOD_NAME: "tools/call",  # as the proxy records a call
                        sc.GEN_AI_TOOL_NAME: tool,
                        sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(arguments),
                        sc.GEN_AI_TOOL_CALL_RESULT: json.dumps({"content": [{"text": "ok"}]}),
                    },
                    "run_id": run_id,
                }
            )
        store.insert_spans(spans)
    return sequences


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))], 1)


def timed(call: Callable[[], Any], repeat: int) -> dict[str, float]:
    call()
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return {
        "p50_ms": round(statistics.median(wall), 1),
        "p95_ms": _percentile(wall, 0.95),
        "max_ms": round(max(wall), 1),
        "cpu_p50_ms": round(statistics.median(cpu), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--noise",
        type=float,
        default=1.0,
        help="scales the 5%% skip/retry/other-arguments odds; "
        "0: every trial makes the plan's calls exactly",
    )
    parser.add_argument("--db", help="an empty database to use (default: a temporary SQLite file)")
    options = parser.parse_args()
    rng = random.Random(14)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as directory:
        url = options.db or f"sqlite:///{directory}/bench.db"
        store = Store(url)
        store.create_schema()
        sequences = load(store, options.trials, options.calls, rng, options.noise)
        settings = Settings(db=url, sandbox_root=f"{directory}/sandboxes")
        results: dict[str, Any] = {
            "database": url.split(":", 1)[0],
            "trials": options.trials,
            "noise": options.noise,
            "calls_per_trial": max(len(s) for s in sequences),
            "align_calls": timed(lambda: align_calls(sequences), options.repeat),
        }
        with TestClient(create_app(settings, store)) as client:
            path = f"/compare/runs?experiment={'e' * 16}&task=long-task"

            def page() -> None:
                response = client.get(path)
                assert response.status_code == 200, response.status_code

            results["page"] = timed(page, options.repeat)
            results["page_bytes"] = len(client.get(path).content)
        store.dispose()
    load_average = os.getloadavg()[0]
    cores = f"{platform.machine()}, {os.cpu_count()} cores"
    results["machine"] = f"{cores}, load {load_before:.1f} -> {load_average:.1f}"
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
