"""#21.5: the per-run BFCL server forked from a parent that imported once is the server a cold
start gives: the same initial state, nothing of another run's, its exit seen by tracecard, and
gone when its run's process is stopped. (Through a real tracecard: tests/server/test_bfcl_e2e.py
runs its BFCL upstream as `tracecard import bfcl` writes it, pre-forked.)"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.tracecard import running_tracecard, runtime_of
from tracecard.client import TracecardClient
from tracecard.scorers import dump_suite
from tracecard.server.bfcl.importer import import_suite, upstream_config
from tracecard.server.bfcl.mcp_server import STATE_TOOL
from tracecard.server.settings import Settings
from tracecard.server.stdio.preload import PRELOAD_VARIABLE

ENTRY = "multi_turn_base_0"  # GorillaFileSystem and TwitterAPI
RELAY = ["-m", "tracecard.server.bfcl.relay", ENTRY]


@contextlib.contextmanager
def prefork() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    folder = tempfile.mkdtemp(prefix="tc-prefork-")  # short: a socket path has ~100 bytes
    path = str(Path(folder) / "p.sock")
    parent = subprocess.Popen(
        [sys.executable, "-m", "tracecard.server.bfcl.prefork", path, "multi_turn_base"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == b"ready"
        yield parent, path
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
        shutil.rmtree(folder, ignore_errors=True)


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start_relay(path: str) -> subprocess.Popen[bytes]:
    """A run's process as tracecard starts it: the relay, in a process group of its own."""
    return subprocess.Popen(
        [sys.executable, *RELAY],
        env={**os.environ, PRELOAD_VARIABLE: path},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )


def run_session(env: dict[str, str], during: Callable[[], None] = lambda: None) -> Any:
    """One run's session: the state at the start, then after a `mkdir` of its own."""
    params = StdioServerParameters(command=sys.executable, args=RELAY, env={**os.environ, **env})

    async def go() -> tuple[Any, Any]:
        async with Client(stdio_client(params)) as client:
            before = (await client.call_tool(STATE_TOOL, {})).structured_content
            during()
            await client.call_tool("mkdir", {"dir_name": "made_by_this_run"})
            after = (await client.call_tool(STATE_TOOL, {})).structured_content
            return before, after

    return anyio.run(go)


def test_a_forked_server_is_as_fresh_as_a_cold_one() -> None:
    cold_start, cold_end = run_session({})  # no parent: the relay runs the server itself
    assert "made_by_this_run" in str(cold_end) and "made_by_this_run" not in str(cold_start)
    with prefork() as (parent, path):
        served: list[int] = []
        first = run_session({PRELOAD_VARIABLE: path}, lambda: served.extend(children(parent.pid)))
        assert served, "the parent forked no server for the relay"
        second = run_session({PRELOAD_VARIABLE: path})
        # each forked run starts where a cold one does, and ends where a cold one ends
        assert first == second == (cold_start, cold_end)

        # a relay whose stdin closes exits with its server's exit code
        relay = start_relay(path)
        until(lambda: children(parent.pid), "a server forked for the relay")
        assert relay.stdin is not None
        relay.stdin.close()
        assert relay.wait(60) == 0
        until(lambda: not children(parent.pid), "the server gone with its stdin")

        # a relay stopped as tracecard stops a run's process (its group killed) takes its
        # server along: nothing is left behind in the parent
        relay = start_relay(path)
        until(lambda: children(parent.pid), "a server forked for the relay")
        os.killpg(relay.pid, signal.SIGKILL)
        relay.wait()
        until(lambda: not children(parent.pid), "the server gone with its relay")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_tracecard_forks_runs_from_the_parent_and_leaves_nothing_behind(tmp_path: Path) -> None:
    suite = import_suite(["multi_turn_base"], ids=[ENTRY], name="bfcl-prefork")
    upstreams = tomllib.loads(upstream_config(categories=["multi_turn_base"]))["upstreams"]
    settings = Settings.model_validate(
        {
            "db": f"sqlite:///{tmp_path / 'tracecard.db'}",
            "sandbox_root": str(tmp_path / "sandboxes"),
            "upstreams": upstreams,
        }
    )
    with running_tracecard(settings) as running, TracecardClient(running.url) as client:
        client.add_suite(dump_suite(suite))
        stdio = runtime_of(running).stdio
        assert stdio is not None

        def one_run() -> tuple[int, int, int]:
            made = httpx.post(
                f"{running.url}/api/runs",
                json={"suite": "bfcl-prefork", "task_id": ENTRY},
                timeout=60,
            )
            assert made.status_code == 201, made.text
            run = made.json()

            async def tools() -> list[str]:
                async with httpx2.AsyncClient(timeout=60) as http:
                    transport = streamable_http_client(run["urls"]["bfcl"], http_client=http)
                    async with Client(transport) as session:
                        return [t.name for t in (await session.list_tools()).tools]

            assert "mkdir" in anyio.run(tools)
            parent = stdio.pool.warm.preloads.pids()["bfcl"]
            relay = stdio.pool.describe()["per_run"][f"bfcl/{run['id']}"]
            assert isinstance(parent, int) and isinstance(relay, int)
            assert Path(f"/proc/{relay}/cmdline").read_bytes().split(b"\0")[1:3] == [
                b"-m",
                b"tracecard.server.bfcl.relay",
            ]
            return parent, relay, until(lambda: children(parent), "the run's forked server")[-1]

        first = one_run()  # the run's server: forked by the parent, not started
        os.kill(first[0], signal.SIGKILL)  # a parent that died is started again for the next run
        until(lambda: not alive(first[0]), "the parent gone")
        second = one_run()
        assert second[0] != first[0] and alive(first[2])  # the first run's server still serves
    # shutdown stops the runs' relays, their forked servers and the parents: no orphans
    until(lambda: not any(alive(p) for p in (*first, *second)), "every process gone", 30)
