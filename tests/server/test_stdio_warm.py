"""#21.5: a per-run stdio process started ahead of its run (the warm pool) is one a run could not
tell from a process started for it: fresh state, its own sandbox, its agent's capabilities in
the handshake; a process that served a run is never handed out again, one that died while
waiting is replaced, and shutdown stops every waiting process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from tests.support.processes import ROOT
from tests.support.proxy import rpc
from tests.support.tracecard import await_flush, running_tracecard, runtime_of
from tracecard.server.runs.registry import RunInfo
from tracecard.server.settings import Settings
from tracecard.server.stdio.process import WARM_ATTRIBUTE
from tracecard.server.stdio.warm import Launch, WarmPool
from tracecard.traces import semconv as sc
from tracecard.traces.store import Store

TOOL_SERVER = str(ROOT / "tests" / "servers" / "tool_server.py")
ACCEPT = {"Accept": "application/json, text/event-stream"}
SUITE = """
schema_version = 1
name = "warm"
{tasks}
"""
TASK = """
[[tasks]]
id = "t{index}"
instruction = "take notes"
upstreams = ["notes"]
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Agent:
    """One run's MCP session through the proxy (JSON answers)."""

    def __init__(self, base: str, run_id: str, capabilities: dict[str, Any]) -> None:
        self.url = f"{base}/runs/{run_id}/mcp/notes"
        hello = rpc(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "test", "version": "1"},
            },
            id=0,
        )
        started = httpx.post(self.url, json=hello, headers=ACCEPT, timeout=60)
        assert started.status_code == 200, started.text
        self.headers = {**ACCEPT, "Mcp-Session-Id": started.headers["mcp-session-id"]}
        self.ids = iter(range(1, 100))

    def call(self, tool: str, **arguments: Any) -> str:
        message = rpc("tools/call", {"name": tool, "arguments": arguments}, id=next(self.ids))
        answer = httpx.post(self.url, json=message, headers=self.headers, timeout=60)
        assert answer.status_code == 200, answer.text
        text = answer.text
        if text.startswith("event:") or text.startswith("id:") or "\ndata:" in text:
            text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
        return str(json.loads(text)["result"]["content"][0]["text"])


def test_runs_take_warm_processes_that_are_as_fresh_as_cold_ones(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "start.txt").write_text("as the fixture has it")
    settings = Settings(
        db=f"sqlite:///{tmp_path / 't.db'}",
        sandbox_root=str(tmp_path / "sandboxes"),
        upstreams={
            "notes": {
                "command": [sys.executable, TOOL_SERVER, "stdio"],
                "cwd": "{sandbox}",  # the sandbox's path is part of what a process starts with
                "fixture": str(fixture),
                "per_run": True,
            }
        },
        pool={"size": 1},
        recording={"batch_delay_ms": 50},
    )
    seen: set[int] = set()  # every pid that served a run or waited for one
    with running_tracecard(settings) as running:
        base = running.url
        toml = {"content-type": "application/toml"}
        suite = SUITE.format(tasks=TASK.format(index=0))
        httpx.post(f"{base}/api/suites", content=suite, headers=toml, timeout=60).raise_for_status()
        made = httpx.post(
            f"{base}/api/experiments",
            json={"suite": "warm", "config": {"name": "warm"}, "trials": 3},
            timeout=60,
        )
        made.raise_for_status()
        runs = [run["id"] for run in made.json()["runs"]]
        stdio = runtime_of(running).stdio
        assert stdio is not None
        upstreams = stdio.pool

        def waiting() -> dict[str, int]:
            entries = upstreams.warm.describe()["waiting"]
            assert isinstance(entries, list)
            return {w["run"]: w["pid"] for w in entries if w["pid"] is not None}

        def serving(run_id: str) -> int:
            pid = upstreams.describe()["per_run"][f"notes/{run_id}"]
            assert isinstance(pid, int)
            return pid

        # the first run starts cold, and the pool starts the next run's process
        first = Agent(base, runs[0], {})
        assert first.call("write_note", key="k", text="left by the first run") == "stored k"
        seen.add(serving(runs[0]))
        dead = _until(lambda: waiting().get(runs[1]), "a warm process for the second run")
        # a waiting process that dies is replaced, never handed out
        os.kill(dead, signal.SIGKILL)
        warm = _until(
            lambda: waiting().get(runs[1]) not in (None, dead) and waiting()[runs[1]],
            "the dead warm process replaced",
        )
        seen |= {dead, warm}

        agent = Agent(base, runs[1], {"roots": {"listChanged": True}})
        assert serving(runs[1]) == warm  # it took the process started for it
        # fresh: nothing of the first run's state (still running), its own agent's capabilities
        assert json.loads(agent.call("read_note", key="k"))["text"] is None
        assert json.loads(first.call("read_note", key="k"))["text"] == "left by the first run"
        assert json.loads(agent.call("client_capabilities")) == {"roots": {"listChanged": True}}
        sandbox = httpx.get(f"{base}/api/runs/{runs[1]}", timeout=60).json()["sandbox"]
        assert Path(sandbox).name == f"{runs[1]}-notes"  # the name a cold start gives it
        assert os.readlink(f"/proc/{warm}/cwd") == sandbox
        assert sorted(p.name for p in Path(sandbox).iterdir()) == ["start.txt"]
        for run_id in runs[:2]:
            httpx.post(f"{base}/api/runs/{run_id}/finish", json={}, timeout=60).raise_for_status()
        _until(lambda: not _alive(warm), "the used process stopped")

        # the third run's process waits; no process that served a run waits again
        last = _until(lambda: waiting().get(runs[2]), "the third run's warm process")
        assert last not in seen
        seen.add(last)
        assert upstreams.warm.describe()["taken"] == 1
        await_flush(running)
        store = Store(settings.db)
        for run_id, was_warm in ((runs[0], False), (runs[1], True)):
            spans = store.spans_for_run(run_id)
            (startup,) = [s for s in spans if s["attributes"].get(sc.UPSTREAM_STARTUP)]
            assert bool(startup["attributes"].get(WARM_ATTRIBUTE)) is was_warm
        store.dispose()
    # shutdown: no process of the pool, waiting or used, is left
    _until(lambda: not any(_alive(pid) for pid in seen), "every process stopped", 30)


async def _take(enabled: bool) -> tuple[object, int]:
    runtime = SimpleNamespace(settings=Settings(pool={"enabled": enabled}), store=None)
    pool = WarmPool(SimpleNamespace(runtime=runtime, per_run={}))  # type: ignore[arg-type]
    run = RunInfo(id="r", trace_id="0" * 32, root_span_id="0" * 16, experiment_id="e")
    taken = await pool.take(Launch("notes", ["true"], {}, None), run)
    await pool.close()
    return taken, pool.lookaheads


def test_the_pool_switched_off_looks_nothing_up_ahead() -> None:
    assert asyncio.run(_take(enabled=False)) == (None, 0)
    assert asyncio.run(_take(enabled=True)) == (None, 1)  # on, the same start looks ahead
