"""A session's cost: initialize, initialized, one `tools/call`, DELETE, one after the other.

Each session through tracecard is an ad-hoc run: created on `initialize`, ended, summarised and
indexed on `DELETE`. This starts the SDK test server with sessions (2025-11-25) and a real
`tracecard serve` on SQLite, runs `--sessions` sessions in a row and prints the tracecard
process's CPU time per session (from /proc) and sessions per second.

`--compare PATH` (repeatable) also runs a tracecard from another checkout (e.g. a `git worktree`
of an earlier commit); each checkout runs `--rounds` times, alternating, each on a fresh
database.

Run:  .venv/bin/python bench/session_cost.py [--sessions 400] [--rounds 2] [--compare PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from proxy_overhead import Caller, cpu_seconds, serve_command  # noqa: E402

from tests.support.processes import free_port, mcp_tool_server, spawn  # noqa: E402


async def one_session(http: aiohttp.ClientSession, url: str) -> None:
    caller = Caller(http, url, modern=False)
    await caller.open()
    await caller.call()
    await caller.close()


async def sessions(url: str, pid: int, count: int) -> tuple[float, float]:
    """(CPU ms per session, sessions per second) over `count` sessions after a warm-up."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for _ in range(20):  # connections, caches, lazy imports
            await one_session(http, url)
        await asyncio.sleep(1.0)  # the warm-up's ends are written
        before, started = cpu_seconds(pid), time.perf_counter()
        for _ in range(count):
            await one_session(http, url)
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0.5)  # the last ends are written (counted: they are the cost)
        return (cpu_seconds(pid) - before) / count * 1000, count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare", type=Path, action="append", default=[])
    args = parser.parse_args()
    roots = {"now": ROOT, **{path.resolve().name: path.resolve() for path in args.compare}}
    print(f"load before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as folder, mcp_tool_server() as session_url:
        config = Path(folder) / "tracecard.toml"
        config.write_text(f'[upstreams.session]\nurl = "{session_url}"\n')
        for round_ in range(args.rounds):
            for name, root in roots.items():
                port = free_port()
                db = f"sqlite:///{folder}/{name}-{round_}.db"
                with spawn(serve_command(root, config, port, db), port) as server:
                    url = f"http://127.0.0.1:{port}/mcp/session"
                    cpu, rate = asyncio.run(sessions(url, server.pid, args.sessions))
                print(f"{name}: {cpu:.2f} ms of CPU a session, {rate:.0f} sessions/s", flush=True)
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
