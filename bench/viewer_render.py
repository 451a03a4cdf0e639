"""Benchmark (not a test): server render time of viewer pages on SQLite.

- a trace page with 5,000 spans (target p50 < 300 ms)
- the runs page over 100,000 stored runs, with and without filters, first and deep pages
  (target p50 < 150 ms)

Data is bulk-loaded with executemany in bounded chunks. Each page is rendered through the real
app in-process (Litestar's TestClient: routing, query, view model, Jinja, response), so the
figure is the server's time for the page without the network.

    .venv/bin/python bench/viewer_render.py [--runs 100000] [--spans 5000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litestar.testing import TestClient  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from tracecard.server.app import create_app  # noqa: E402
from tracecard.server.settings import Settings  # noqa: E402
from tracecard.traces import semconv as sc  # noqa: E402
from tracecard.traces.models import RunRow, ScoreRow, SpanRow  # noqa: E402
from tracecard.traces.store import Store, span_values  # noqa: E402

CHUNK = 10_000
TOOLS = ("lookup_order", "issue_refund", "read_file", "list_directory", "get_forecast")
COMPONENTS = ("invocation", "completion", "outcome", "safety")


def _bulk(store: Store, table: Any, rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), CHUNK):
        with store.writing() as session:
            session.execute(insert(table), rows[start : start + CHUNK])


def load_runs(store: Store, count: int, rng: random.Random) -> None:
    """`count` runs, four scores each and two tool-call spans each."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    runs, scores, spans = [], [], []
    for i in range(count):
        run_id = f"{i:016x}"
        status = "finished" if rng.random() > 0.1 else rng.choice(["errored", "timed_out"])
        runs.append(
            {
                "id": run_id,
                "experiment_id": f"exp{i // 2000:04d}",
                "task_id": f"task-{i % 50}",
                "trial": i % 5,
                "config_name": f"config-{i % 7}",
                "config": {},
                "status": status,
                "trace_id": f"{i:032x}",
                "root_span_id": f"{i:016x}",
                "flags": ["hallucinated_completion"] if i % 37 == 0 else [],
                "created_at": base + timedelta(seconds=i),
            }
        )
        for component in COMPONENTS:
            passed = rng.random() > 0.25
            scores.append(
                {
                    "run_id": run_id,
                    "component": component,
                    "value": 1.0 if passed else 0.0,
                    "passed": passed,
                    "evidence": {},
                    "scorer": component,
                    "scorer_version": "1",
                    "created_at": base,
                }
            )
        for n in range(2):
            tool = rng.choice(TOOLS)
            error = "tool_error" if rng.random() < 0.05 else None
            spans.append(
                {
                    "span_id": f"{i:012x}{n:04x}",
                    "trace_id": f"{i:032x}",
                    "parent_span_id": f"{i:016x}",
                    "run_id": run_id,
                    "name": f"tools/call {tool}",
                    "kind": 3,
                    "start_ns": i * 10**9 + n,
                    "end_ns": i * 10**9 + n + 10**6,
                    "status_code": 0,
                    "tool_name": tool,
                    "error_type": error,
                    "role": "agent",
                    "attributes": {},
                    "events": [],
                    "resource": {},
                }
            )
    _bulk(store, RunRow.__table__, runs)  # type: ignore[attr-defined]
    _bulk(store, ScoreRow.__table__, scores)  # type: ignore[attr-defined]
    _bulk(store, SpanRow.__table__, spans)  # type: ignore[attr-defined]


def load_big_trace(store: Store, count: int, rng: random.Random) -> str:
    """One run with `count` spans: a root, LLM spans, and tool calls with payloads."""
    run_id, trace_id, root = "b" * 16, "b" * 32, "c" * 16
    store.add_run(
        RunRow(id=run_id, task_id="big", trace_id=trace_id, root_span_id=root, status="finished")
    )
    spans = []
    t = 1_700_000_000 * 10**9
    for i in range(count):
        # Every tenth span nests under the previous one: a tree, not a flat list.
        parent = None if i == 0 else (root if i % 10 or i == 1 else f"f{i - 1:015x}")
        tool = rng.choice(TOOLS)
        arguments = {"path": f"/sandbox/file-{i}.txt", "limit": i}
        result = {"content": [{"type": "text", "text": "x" * rng.randint(10, 3000)}]}
        attributes = {
            sc.RUN_ID: run_id,
            sc.MCP_METHOD_NAME: "tools/call",
            sc.ROLE: sc.ROLE_AGENT,
            sc.UPSTREAM: "tools",
            sc.GEN_AI_TOOL_NAME: tool,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(arguments),
            sc.GEN_AI_TOOL_CALL_RESULT: json.dumps(result),
        }
        if i % 50 == 0:
            attributes[sc.ERROR_TYPE] = "tool_error"
        spans.append(
            span_values(
                {
                    "trace_id": trace_id,
                    "span_id": root if i == 0 else f"f{i:015x}",
                    "parent_span_id": parent,
                    "name": "invoke_agent bench" if i == 0 else f"tools/call {tool}",
                    "kind": 3,
                    "start_time_unix_nano": t + i * 2_000_000,
                    "end_time_unix_nano": t + i * 2_000_000 + rng.randint(10**5, 10**8),
                    "status": {"code": 0},
                    "attributes": attributes,
                    "run_id": run_id,
                }
            )
        )
    _bulk(store, SpanRow.__table__, spans)  # type: ignore[attr-defined]
    evidence = {"expected": [{"span_id": f"f{i:015x}"} for i in range(1, count, 97)]}
    store.add_all(
        [ScoreRow(run_id=run_id, component="invocation", value=0.5, passed=False,
                  evidence=evidence, scorer="invocation", scorer_version="1")]
    )
    return run_id


def timed(call: Callable[[], Any], repeat: int) -> dict[str, float]:
    """p50/p90/max of `repeat` calls in milliseconds, after one warm-up call, and this
    process's CPU time per call (p50): on the shared machine wall time mostly follows the other
    processes' load, CPU time much less."""
    call()
    samples, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        samples.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 1),
        "p90_ms": round(samples[int(0.9 * (len(samples) - 1))], 1),
        "max_ms": round(samples[-1], 1),
        "cpu_p50_ms": round(statistics.median(cpu), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--spans", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/bench.db"
        store = Store(url)
        store.create_schema()
        started = time.perf_counter()
        load_runs(store, options.runs, rng)
        big = load_big_trace(store, options.spans, rng)
        loaded_s = time.perf_counter() - started
        with store.engine.begin() as connection:
            connection.exec_driver_sql("ANALYZE")
        settings = Settings(db=url, sandbox_root=f"{directory}/sandboxes")
        app = create_app(settings, store)
        results: dict[str, Any] = {}
        with TestClient(app) as client:

            def page(path: str) -> Callable[[], Any]:
                def fetch() -> None:
                    response = client.get(path)
                    assert response.status_code == 200, (path, response.status_code)

                return fetch

            deep = "/runs"
            for _ in range(200):  # walk up to 200 pages deep, to time a page far from the top
                body = client.get(deep).text
                found = re.search(r'href="(/runs\?[^"]*cursor=[^"]+)"', body)  # only "next" has one
                if found is None:
                    break
                deep = found.group(1).replace("&amp;", "&")
            cases = {
                f"trace page, {options.spans} spans": f"/runs/{big}",
                f"runs page 1 of {options.runs}": "/runs",
                "runs page 200 (keyset cursor)": deep,
                "runs, failed outcome": "/runs?component=outcome",
                "runs, status errored": "/runs?status=errored",
                "runs, tool issue_refund": "/runs?tool=issue_refund",
                "runs, error type tool_error": "/runs?error=tool_error",
                "runs, task + config": "/runs?task=task-3&config=config-3",
                "runs, flag hallucinated": "/runs?flag=hallucinated_completion",
                "runs htmx fragment, failed outcome": "/runs?component=outcome",
            }
            for name, path in cases.items():
                if "fragment" in name:
                    headers = {"HX-Request": "true", "HX-Target": "runs-table"}
                    results[name] = timed(
                        lambda p=path, h=headers: client.get(p, headers=h), options.repeat
                    )
                else:
                    results[name] = timed(page(path), options.repeat)
        store.dispose()
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work sharing the cores
        "runs": options.runs,
        "spans_in_trace": options.spans,
        "load_s": round(loaded_s, 1),
        "results": results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
