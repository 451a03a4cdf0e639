"""BFCL multi-turn runs through `tracecard worker` processes on PostgreSQL: runs per minute with
1, 2 and 3 workers on this machine (issue #21).

    .venv/bin/python bench/workers.py [--tasks 200] [--trials 3] [--workers 1,2,3]
        [--concurrency 4] [--pool on|off] [--pg postgresql://postgres@127.0.0.1:5432/test]

Imports `--tasks` multi_turn_base entries once; then, per worker count, a fresh PostgreSQL
database, that many `tracecard worker` processes (each its own proxy and per-run BFCL server
processes, `--concurrency` cells at a time), and `tracecard run --queue` with
examples/agents/bfcl_replay.py, timed from the enqueue to the last cell's end (workers are
started and ready before the clock starts). Prints JSON: runs/min, pass rates, the load average,
and the machine's CPU seconds during the clock by kind (`user`: this bench, `nice`: niced work).
`--pool off` runs every per-run BFCL server cold (`[pool] enabled = false`: no warm processes, no
pre-forked parent), the way runs started before #21.5. Bounded: each experiment stops at
`--timeout` seconds; every process is stopped afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TRACECARD = str(Path(PY).with_name("tracecard"))


def _database(admin: str) -> str:
    name = f"tc_bench_workers_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{admin.rsplit('/', 1)[0]}/{name}"


def _drop(admin: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _ready(db: str, count: int) -> bool:
    try:
        with psycopg.connect(db) as conn:
            row = conn.execute(
                "SELECT count(*) FROM job_workers WHERE stopped_at IS NULL "
                "AND heartbeat_at > now() - interval '10 seconds'"
            ).fetchone()
    except psycopg.Error:
        return False
    return bool(row and row[0] >= count)


def _cpu_times() -> dict[str, float]:
    """The machine's CPU seconds by kind since boot (/proc/stat's first line): `user` is what
    processes at nice <= 0 used (the bench), `nice` what niced processes used (other work on the
    machine), so a figure can say how much of the machine the bench had."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    tick = os.sysconf("SC_CLK_TCK")
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {name: int(value) / tick for name, value in zip(names, fields, strict=False)}


def one(args: argparse.Namespace, work: Path, suite: Path, workers: int) -> dict[str, Any]:
    """One experiment on `workers` worker processes."""
    db = _database(args.pg)
    config = work / "bfcl.upstreams.toml"
    env = {
        **os.environ,
        "TRACECARD_SANDBOX_ROOT": str(work / "sandboxes"),
        "TRACECARD_POOL__ENABLED": "true" if args.pool == "on" else "false",
    }
    started: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(workers):
            log = open(work / f"worker-{workers}-{index}.log", "wb")  # noqa: SIM115
            started.append(
                subprocess.Popen(
                    [TRACECARD, "worker", "--db", db, "--config", str(config),
                     "--concurrency", str(args.concurrency),
                     "--work-dir", str(work / f"runs-{workers}")],
                    cwd=work, env=env, stdout=log, stderr=log,
                )  # fmt: skip
            )
        deadline = time.monotonic() + 300
        while not _ready(db, workers):
            if time.monotonic() > deadline:
                raise SystemExit(f"{workers} workers did not start in 300 s: see {work}")
            time.sleep(0.5)
        load_before = os.getloadavg()
        cpu_before = _cpu_times()
        clock = time.perf_counter()
        done = subprocess.run(
            [TRACECARD, "run", "--queue", "--db", db, "--config", str(config),
             "--suite", str(suite), "--name", f"replay-{workers}w",
             "--trials", str(args.trials), "--port", "0", "--json", "--quiet",
             "--agent", f"{PY} {ROOT / 'examples' / 'agents' / 'bfcl_replay.py'}",
             "--max-failed-runs", str(args.tasks * args.trials)],
            cwd=work, env=env, capture_output=True, text=True, timeout=args.timeout,
        )  # fmt: skip
        wall = time.perf_counter() - clock
        cpu_after = _cpu_times()
        cpu = {name: round(cpu_after[name] - cpu_before[name], 1) for name in cpu_before}
        summary = json.loads(done.stdout[done.stdout.index("{") : done.stdout.rindex("}") + 1])
        runs = args.tasks * args.trials
        components = summary.get("components", {})
        return {
            "workers": workers,
            "concurrency_per_worker": args.concurrency,
            "pool": args.pool,
            "runs": runs,
            "wall_s": round(wall, 1),
            "runs_per_min": round(runs / wall * 60, 1),
            "cells": summary.get("cells"),
            "lost_attempts": summary.get("lost_attempts"),
            "outcome_pass_rate": (components.get("outcome", {}).get("pass_rate") or {}).get(
                "value"
            ),
            "exit_code": done.returncode,
            "cpu_s": cpu,
            "load_before": [round(x, 1) for x in load_before],
            "load_after": [round(x, 1) for x in os.getloadavg()],
        }
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        _drop(args.pg, db)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pool", choices=("on", "off"), default="on")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="workers-bench-"))
    suite = work / "bfcl.toml"
    subprocess.run(
        [TRACECARD, "import", "bfcl", "--category", "multi_turn_base",
         "--limit", str(args.tasks), "-o", str(suite)],
        check=True, cwd=work, capture_output=True,
    )  # fmt: skip
    results = []
    for n in args.workers.split(","):
        results.append(one(args, work, suite, int(n)))
        # each configuration as it ends: a long series stopped part-way keeps what it measured
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"tasks": args.tasks, "trials": args.trials, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
