"""How fast the `tracecard` command answers (#24 item 1): the median wall time of 10 runs of
`tracecard --help`, `--version`, `gate --help`, and `gate`/`export`/`compare` on an experiment
stored in a fresh SQLite file, each in its own process as a person types it; with the modules
each one imports (and whether SQLAlchemy, aiohttp, Litestar or OpenTelemetry are among them).

    .venv/bin/python bench/cli_start.py [--runs 10]

Targets (docs/PERFORMANCE.md): `--help` < 0.3 s, `gate` on a stored experiment < 0.8 s."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("sqlalchemy", "aiohttp", "litestar", "opentelemetry")
SUITE = 'schema_version = 1\nname = "five"\n' + "".join(
    f'\n[[tasks]]\nid = "t{i}"\ninstruction = "Say yes."\n'
    f'[tasks.completion]\nchecks = [{{ exact = "yes" }}]\n'
    for i in range(5)
)
COUNT = (
    "import runpy, sys\n"
    "sys.argv = ['tracecard', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('tracecard.server.cli', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
    "print(len(sys.modules), ','.join(heavy) or '-', file=sys.stderr)\n"
)


async def _experiment(db: str, name: str, answer: str) -> str:
    from litestar.testing import AsyncTestClient

    from tracecard.server.app import create_app
    from tracecard.server.settings import Settings
    from tracecard.traces.store import Store

    settings = Settings(db=db)
    async with AsyncTestClient(create_app(settings, Store(db))) as client:
        await client.post("/api/suites", content=SUITE)
        body = {"suite": "five", "config": {"name": name}, "trials": 2}
        experiment = (await client.post("/api/experiments", json=body)).json()
        for run in experiment["runs"]:
            await client.post(f"/api/runs/{run['id']}/finish", json={"final_answer": answer})
    return str(experiment["id"])


def _median(argv: list[str], runs: int, cwd: str) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False, timeout=120)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _modules(args: list[str], cwd: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", COUNT, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    return done.stderr.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    tracecard = str(Path(sys.executable).with_name("tracecard"))
    with tempfile.TemporaryDirectory() as folder:
        db = f"sqlite:///{folder}/tracecard.db"
        asyncio.run(_experiment(db, "good", "yes"))
        asyncio.run(_experiment(db, "poor", "no"))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--help": ["--help"],
            "--version": ["--version"],
            "gate --help": ["gate", "--help"],
            "gate (stored)": [
                "gate",
                "--experiment",
                "good",
                "--min",
                "completion=0.8",
                "--db",
                db,
            ],
            "export (stored)": ["export", "--experiment", "good", "--format", "md", "--db", db],
            "compare (stored)": ["compare", "good", "poor", "--db", db],
        }
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {runs} runs each")
        print(f"{'command':<18} {'median s':>9}  modules  heavy modules imported")
        for name, args in commands.items():
            argv = args if name.startswith("python") else [tracecard, *args]
            seconds = _median(argv, runs, folder)
            count = "" if name.startswith("python") else _modules(args, folder)
            print(f"{name:<18} {seconds:9.3f}  {count}", flush=True)


if __name__ == "__main__":
    main()
