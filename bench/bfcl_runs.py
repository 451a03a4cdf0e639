"""BFCL multi-turn tasks through `tracecard run` with the replay agent: runs per minute and where
the time goes (BFCL server start per run, probes, scoring).

    .venv/bin/python bench/bfcl_runs.py [--tasks 200] [--trials 3] [--concurrency 4] [--pool off]

Imports `--tasks` multi_turn_base entries, runs them with examples/agents/bfcl_replay.py
through an embedded server on a fresh SQLite file, then reads the stored spans: the first call
of each run (it includes starting that run's BFCL server process), the per-turn probe spans,
and the turn spans; scoring time is measured by rescoring every stored trace in-process.
`--pool off` runs with `[pool] enabled = false` (each run's server started cold, no pre-forked
parent), as before #21.5. Reports wall time, the CPU time of `tracecard run` and everything it
started (user + system, children included), and the load average before and after.
Prints JSON. Bounded by the run's own timeouts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TRACECARD = str(Path(PY).with_name("tracecard"))  # the console script beside the interpreter


def _ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "sum_s": round(sum(values) / 1000, 1),
    }


def _rescoring_ms(db: Path) -> float:
    """Every stored run scored again in-process (all components, no tool touched), per run."""
    from tracecard.server.evaluation.service import experiment_with_runs, rescore
    from tracecard.traces.store import Store

    store = Store(f"sqlite:///{db}")
    try:
        with sqlite3.connect(db) as con:
            (experiment,) = con.execute("select id from experiments").fetchone()
        _row, runs = experiment_with_runs(store, experiment)
        started = time.perf_counter()
        scored = rescore(store, runs)
        return round((time.perf_counter() - started) * 1000 / max(len(scored), 1), 1)
    finally:
        store.dispose()


def _value(summary: dict[str, Any], component: str) -> float | None:
    stat = summary.get("components", {}).get(component, {}).get("pass_rate") or {}
    value = stat.get("value") if isinstance(stat, dict) else stat
    return value if isinstance(value, float | int) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pool", choices=("on", "off"), default="on")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bfcl-bench-"))
    suite = work / "bfcl.toml"
    started = time.perf_counter()
    subprocess.run(
        [TRACECARD, "import", "bfcl", "--category", "multi_turn_base",
         "--limit", str(args.tasks), "-o", str(suite)],
        check=True, cwd=work, capture_output=True,
    )  # fmt: skip
    imported = time.perf_counter() - started
    db = work / "tracecard.db"
    agent = f"{PY} {ROOT / 'examples' / 'agents' / 'bfcl_replay.py'}"
    env = {**os.environ, "TRACECARD_POOL__ENABLED": "true" if args.pool == "on" else "false"}
    load_before = os.getloadavg()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [TRACECARD, "run", "--suite", str(suite), "--config",
         str(work / "bfcl.upstreams.toml"), "--name", "replay", "--trials", str(args.trials),
         "--concurrency", str(args.concurrency), "--agent", agent, "--db", str(db),
         "--port", "0", "--quiet", "--json", "--work-dir", str(work / "runs")],
        cwd=work, capture_output=True, text=True, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    load_after = os.getloadavg()
    summary = json.loads(done.stdout[done.stdout.index("{") : done.stdout.rindex("}") + 1])
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "select run_id, name, start_ns, end_ns, role, attributes from spans"
        ).fetchall()
    probes: list[float] = []
    turns: list[float] = []
    starts: list[float] = []  # `initialize`: the per-run BFCL server is started for it
    server_starts: list[float] = []  # tracecard's handshake span: spawn (or take) to answer
    warm = 0
    calls: list[float] = []
    roots: list[float] = []
    for _run_id, name, start, end, role, attributes in rows:
        duration = ((end or start) - start) / 1e6
        attrs = json.loads(attributes)
        if name.startswith("turn "):
            turns.append(duration)
        elif "tracecard.probe.id" in attrs:
            probes.append(duration)
        elif role == "agent" and name.startswith("initialize"):
            if attrs.get("tracecard.upstream.startup"):
                server_starts.append(duration)
                warm += bool(attrs.get("tracecard.upstream.warm"))
            else:
                starts.append(duration)
        elif role == "agent" and name.startswith("tools/call"):
            calls.append(duration)
        elif name.startswith("invoke_agent"):
            roots.append(duration)
    scoring = _rescoring_ms(db)
    runs = args.tasks * args.trials
    result: dict[str, Any] = {
        "tasks": args.tasks,
        "trials": args.trials,
        "concurrency": args.concurrency,
        "runs": runs,
        "pool": args.pool,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in load_after],
        "import_s": round(imported, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "cpu_s_per_run": round(cpu / runs, 2),
        "runs_per_min": round(runs / wall * 60, 1),
        "initialize_incl_server_start": _ms(starts),
        "server_start_handshake": _ms(server_starts),
        "warm_starts": warm,
        "tool_calls": _ms(calls),
        "run_root_spans": _ms(roots),
        "probe_spans": _ms(probes),
        "turn_spans": _ms(turns),
        "scoring_ms_per_run": scoring,
        "exit_code": done.returncode,
        # scorecard schema 2: each statistic is {value, low, high, n_tasks}
        "outcome_pass_rate": _value(summary, "outcome"),
        "invocation_pass_rate": _value(summary, "invocation"),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
