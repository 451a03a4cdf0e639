"""Reliability under faults: answered calls vs stored spans across SIGKILL, SIGTERM, a locked
database and hostile OTLP input.

N agents (the MCP session protocol, one session each) make M `tools/call echo` each through
`tracecard serve` to the SDK's test MCP server, all on 127.0.0.1. Mid-load the server is killed
(SIGKILL, then in a second round SIGTERM) and restarted on the same database; agents retry a
refused call until the server is back. On SQLite a third round holds the database's write lock
from another process for longer than the busy timeout. Between rounds, hostile OTLP requests
are posted. At the end every answered call (session id + JSON-RPC id) is looked up among the
stored spans: what is missing was lost, and its answer time is compared with the kill.

Run: .venv/bin/python bench/reliability.py [--agents 20] [--calls 60] [--db postgresql://...]
Bounded: every round has a deadline; the script stops every process it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from proxy_overhead import Caller, machine, serve_command  # noqa: E402

from tests.server.test_otlp_hostile import MALFORMED  # noqa: E402
from tests.support.processes import free_port, mcp_tool_server, wait_for_port  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402

BATCH_DELAY_MS = 200
ROUND_DEADLINE_S = 120


@dataclass
class Load:
    """Every answered call: (session id, JSON-RPC id) -> wall-clock time of the answer."""

    answered: dict[tuple[str, str], float] = field(default_factory=dict)
    refused: int = 0  # attempts that met a dead or restarting server (retried)


class Server:
    """`tracecard serve` as a child process group that can be killed and started again."""

    def __init__(self, config: Path, db: str, cwd: Path) -> None:
        self.port = free_port()
        self.config, self.db, self.cwd = config, db, cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = open(cwd / "server.log", "ab")  # noqa: SIM115 - closed by stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            serve_command(ROOT, self.config, self.port, self.db),
            cwd=self.cwd,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for_port(self.port, timeout=60, proc=self.proc)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        self.log.close()


async def agent(url: str, calls: int, load: Load, deadline: float) -> None:
    """One session making `calls` answered calls; a refused attempt is retried, not counted."""
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        caller = Caller(http, url, modern=False)
        while caller.session_id is None:
            try:
                await caller.open()
            except (TimeoutError, aiohttp.ClientError, KeyError):
                load.refused += 1
                await asyncio.sleep(0.1)
        done = 0
        while done < calls and time.monotonic() < deadline:
            try:
                await caller.call()
            except (TimeoutError, aiohttp.ClientError, RuntimeError):
                load.refused += 1
                await asyncio.sleep(0.1)
                continue
            load.answered[(caller.session_id, str(caller.next_id))] = time.time()
            done += 1


async def round_with_fault(
    server: Server, agents: int, calls: int, load: Load, fault: str
) -> dict[str, Any]:
    """Run the load; when 40% of it is answered, apply `fault`; restart if it stopped."""
    deadline = time.monotonic() + ROUND_DEADLINE_S
    url = f"{server.url}/mcp/tools"
    before = len(load.answered)
    tasks = [asyncio.create_task(agent(url, calls, load, deadline)) for _ in range(agents)]
    while len(load.answered) - before < 0.4 * agents * calls and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    outcome: dict[str, Any] = {"fault": fault, "at": time.time()}
    if fault in ("SIGKILL", "SIGTERM"):
        sig = signal.SIGKILL if fault == "SIGKILL" else signal.SIGTERM
        await asyncio.to_thread(server.signal, sig)
        outcome["at"] = time.time()  # the server is gone: nothing is answered after this
        outcome["down_s"] = await asyncio.to_thread(_restart, server)
        health = httpx.get(f"{server.url}/healthz", timeout=30).json()
        outcome["recovered_from_spool"] = health["recording"]["recovered"]
    elif fault == "locked":
        holder = _hold_sqlite_lock(server.db, 12.0)  # past the 10 s busy timeout
        outcome["held_s"] = 12.0
    await asyncio.gather(*tasks)
    if fault == "locked":
        holder.wait(30)
    outcome["answered"] = len(load.answered) - before
    return outcome


def _restart(server: Server) -> float:
    started = time.monotonic()
    server.start()
    return round(time.monotonic() - started, 2)


def _hold_sqlite_lock(db: str, seconds: float) -> subprocess.Popen[bytes]:
    path = db.removeprefix("sqlite:///")
    code = (
        "import sqlite3, time\n"
        f"c = sqlite3.connect({path!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        f"time.sleep({seconds})\n"
        "c.execute('COMMIT')\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def hostile_inputs(url: str) -> dict[str, Any]:
    """Bad OTLP bodies: each must get a 4xx or a 200 with partial success, never a 5xx."""
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "chat\x00nul",
        "startTimeUnixNano": str((1 << 64) - 1),
        "attributes": [{"key": "k\x00", "value": {"stringValue": "v\x00"}}],
    }
    bodies: list[bytes] = [orjson.dumps(document) for document, _ in MALFORMED]
    bodies += [
        orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}),
        orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{**span, "kind": 1 << 40}]}]}]}),
        b"{not json",
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + b"{}," * 30000 + b"{}]}]}]}",
    ]
    statuses: dict[int, int] = {}
    for body in bodies:
        response = httpx.post(
            f"{url}/v1/traces", content=body, headers={"content-type": "application/json"}
        )
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    return {"tried": len(bodies), "statuses": statuses}


def stored_calls(db: str) -> set[tuple[str, str]]:
    """(session id, JSON-RPC id) of every stored `tools/call` span."""
    store = Store(db)
    found: set[tuple[str, str]] = set()
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT attributes FROM spans WHERE name = 'tools/call echo'"
        )
        for (attributes,) in rows:
            values = orjson.loads(attributes) if isinstance(attributes, str) else attributes
            found.add((str(values.get("mcp.session.id")), str(values.get("jsonrpc.request.id"))))
    store.dispose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--calls", type=int, default=60, help="answered calls per agent per round")
    parser.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tc-reliability-"))
    db = args.db or f"sqlite:///{tmp / 'tracecard.db'}"
    faults = ["SIGKILL", "SIGTERM"] + (["locked"] if db.startswith("sqlite") else [])
    load = Load()
    rounds = []
    with mcp_tool_server() as upstream:
        config = tmp / "tracecard.toml"
        config.write_text(
            f'[upstreams.tools]\nurl = "{upstream}"\n\n'
            f"[recording]\nbatch_delay_ms = {BATCH_DELAY_MS}\n"
        )
        server = Server(config, db, tmp)
        server.start()
        try:
            for fault in faults:
                rounds.append(
                    asyncio.run(round_with_fault(server, args.agents, args.calls, load, fault))
                )
            bad = hostile_inputs(server.url)
            health = httpx.get(f"{server.url}/healthz").json()
        finally:
            server.stop()  # SIGTERM: a graceful stop flushes every span
    stored = stored_calls(db)
    lost = {key: when for key, when in load.answered.items() if key not in stored}
    print(f"machine: {machine()}, load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"database: {db.split('://')[0]}, batch_delay_ms {BATCH_DELAY_MS}")
    print(f"load: {args.agents} agents x {args.calls} calls x {len(faults)} rounds")
    fault_times = [outcome.pop("at") for outcome in rounds]
    for outcome, fault_at in zip(rounds, fault_times, strict=True):
        # a lost call belongs to the first fault after its answer
        window = [
            when - fault_at
            for when in lost.values()
            if when <= fault_at and not any(when <= t < fault_at for t in fault_times)
        ]
        outcome["lost"] = len(window)
        if window:
            outcome["lost_answered_ms_before_fault"] = [
                round(-1000 * min(window)),
                round(-1000 * max(window)),
            ]
        print(f"  {outcome}")
    print(f"bad OTLP inputs: {bad}")
    print(
        f"answered {len(load.answered)}, stored {len(load.answered) - len(lost)}, "
        f"lost {len(lost)}, refused attempts (retried) {load.refused}"
    )
    print(f"/healthz recording: {health.get('recording')}")


if __name__ == "__main__":
    main()
