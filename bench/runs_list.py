"""Benchmark (not a test): the runs list over 1,000,000 runs, with search (target p50 < 100 ms).

Each run has two scores (outcome, invocation; a quarter fail), two tool-call spans and a search
document of a tool name and a dozen words from a 20,000-word vocabulary (one word in ~1% of
runs, one in ~20%, one in one run). Rows are bulk-inserted with the driver's executemany in
chunks of 20,000. Each page is rendered through the real app in-process (Litestar's TestClient:
routing, the query with its total, the view model, Jinja), so the figure is the server's time
for the page without the network.

    .venv/bin/python bench/runs_list.py [--runs 1000000] [--repeat 20] [--db sqlite|postgres]
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
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litestar.testing import TestClient  # noqa: E402

from tracecard.server.app import create_app  # noqa: E402
from tracecard.server.settings import Settings  # noqa: E402
from tracecard.traces.search import time_rowid, write_documents  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402

CHUNK = 20_000
TOOLS = ("lookup_order", "issue_refund", "read_file", "list_directory", "get_forecast")
PG_ADMIN = os.environ.get("TRACECARD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _words(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ren", "tas", "vo", "quin", "bel", "dor", "sa", "pe", "tru"]
    found: set[str] = set()
    while len(found) < 20_000:
        found.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(found)


def _chunks(count: int) -> Iterator[range]:
    for start in range(0, count, CHUNK):
        yield range(start, min(start + CHUNK, count))


def load(store: Store, count: int, rng: random.Random) -> None:
    """`count` runs with scores, spans and search documents, in bounded chunks."""
    vocabulary = _words(rng)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    sqlite = store.engine.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"

    def sql(table: str, columns: str) -> str:
        marks = ", ".join([mark] * len(columns.split(",")))
        return f"INSERT INTO {table} ({columns}) VALUES ({marks})"

    run_sql = sql(
        "runs",
        "id, experiment_id, task_id, trial, config_name, config, status, trace_id, root_span_id,"
        " flags, created_at, upstreams, calls, errors, tokens, duration_ms, client, score_verdict",
    )
    score_sql = sql(
        "scores", "run_id, component, value, passed, evidence, scorer, scorer_version, created_at"
    )
    span_sql = sql(
        "spans",
        "span_id, trace_id, parent_span_id, run_id, name, kind, start_ns, end_ns, status_code,"
        " tool_name, error_type, role, attributes, events, resource, links",
    )
    for rows in _chunks(count):
        runs, scores, spans, documents, fts = [], [], [], [], []
        for i in rows:
            run_id = f"{i:016x}"
            created = base + timedelta(seconds=i)
            stamp = created.strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else created
            status = "finished" if rng.random() > 0.05 else "errored"
            passes = [rng.random() > 0.25 for _component in ("invocation", "outcome")]
            runs.append(
                (run_id, f"exp{i // 2000:04d}", f"task-{i % 50}", i % 5, f"config-{i % 7}", "{}",
                 status, f"{i:032x}", run_id, "[]", stamp, '["tools"]', rng.randint(1, 30),
                 int(rng.random() < 0.1), rng.randint(0, 20_000), rng.randint(50, 90_000),
                 "mcp/0.1.0", "passed" if all(passes) else "failed")
            )
            for component, passed in zip(("invocation", "outcome"), passes, strict=True):
                row = (run_id, component, float(passed), passed, "{}", component, "1", stamp)
                scores.append(row)
            words = [rng.choice(vocabulary) for _ in range(12)]
            if i % 100 == 0:
                words.append("escalation")  # ~1% of runs
            if i % 5 == 0:
                words.append("refund")  # ~20% of runs
            if i == count // 2:
                words.append("zanzibarville")  # one run
            tool = rng.choice(TOOLS)
            documents.append((run_id, created, f"{tool}\n" + " ".join(words)))
            if sqlite:  # one slot per second here: the row tracecard would give it
                fts.append((time_rowid(created), run_id, documents[-1][2]))
            for n in range(2):
                spans.append(
                    (f"{i:012x}{n:04x}", f"{i:032x}", run_id, run_id, f"tools/call {tool}", 3,
                     i * 10**9 + n, i * 10**9 + n + 10**6, 0, tool,
                     "tool_error" if rng.random() < 0.05 else None, "agent", "{}", "[]", "{}",
                     "[]")
                )
        connection = store.engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.executemany(run_sql, runs)
            cursor.executemany(score_sql, scores)
            cursor.executemany(span_sql, spans)
            if sqlite:
                cursor.executemany(
                    "INSERT INTO run_search (rowid, run_id, body) VALUES (?, ?, ?)", fts
                )
            connection.commit()
        finally:
            connection.close()
        if not sqlite:
            write_documents(store, documents)


def timed(call: Callable[[], Any], repeat: int) -> dict[str, float]:
    """p50/p90/max wall time and p50 CPU time (this process) of `repeat` calls in ms, after one
    warm-up call: on a shared machine the wall time follows the others' load, CPU time less."""
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


def _database(kind: str, directory: str, keep: str | None) -> tuple[str, Callable[[], None], bool]:
    """(url, drop, loaded already?): SQLite in `directory` (or the file `keep`); a fresh
    PostgreSQL database, or the database named `keep`, kept for the next run."""
    if kind == "sqlite":
        if keep is not None:
            return f"sqlite:///{keep}", lambda: None, Path(keep).exists()
        return f"sqlite:///{directory}/bench.db", lambda: None, False
    import psycopg

    name = keep or f"tc_bench_{os.getpid()}"
    base = PG_ADMIN.rsplit("/", 1)[0]
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            admin.execute(f'CREATE DATABASE "{name}"')
    if keep is not None:
        return f"{base}/{name}", lambda: None, found is not None

    def drop() -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"{base}/{name}", drop, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--keep",
        help="SQLite file, or PostgreSQL database name, to build once and reuse (skips loading)",
    )
    options = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as directory:
        url, drop, reuse = _database(options.db, directory, options.keep)
        try:
            store = Store(url)
            store.create_schema()
            started = time.perf_counter()
            if not reuse:
                load(store, options.runs, rng)
                with store.engine.begin() as connection:
                    connection.exec_driver_sql("ANALYZE")
            loaded_s = time.perf_counter() - started
            settings = Settings(db=url, sandbox_root=f"{directory}/sandboxes")
            headers = {"HX-Request": "true", "HX-Target": "runs-table"}
            results: dict[str, Any] = {}
            with TestClient(create_app(settings, store)) as client:

                def page(path: str) -> Callable[[], None]:
                    def get() -> None:
                        response = client.get(path, headers=headers)
                        assert response.status_code == 200, response.text[:300]

                    return get

                deep = client.get("/runs?limit=50", headers=headers).text
                cursor = deep.split("cursor=")[1].split('"')[0] if "cursor=" in deep else ""
                paths = {
                    "newest page": "/runs",
                    "status=failed": "/runs?status=failed",
                    "component=outcome": "/runs?component=outcome",
                    "search, 1 run (zanzibarville)": "/runs?q=zanzibarville",
                    "search, ~1% of runs (escalation)": "/runs?q=escalation",
                    "search, ~20% of runs (refund)": "/runs?q=refund",
                    "search ~1% + status=failed": "/runs?q=escalation&status=failed",
                    "search prefix (escalat*)": "/runs?q=escalat*",
                    "task prefix (task-4)": "/runs?task=task-4",
                    "sort=calls": "/runs?sort=calls&order=desc",
                    "second page (cursor)": f"/runs?cursor={cursor}",
                }
                for name, path in paths.items():
                    results[name] = timed(page(path), options.repeat)
            store.dispose()
        finally:
            drop()
    report = {
        "database": options.db,
        "runs": options.runs,
        "load_s": round(loaded_s, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average": os.getloadavg(),
        "pages": results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
