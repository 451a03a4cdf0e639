"""Outcome probes share one connection pool for the server's lifetime: probes keep working over
many runs and after their upstream restarts, and the pool is closed when the server stops.

A real tracecard (uvicorn) in front of the SDK test server over stdio; the probe reads a note
through tracecard's own proxy, as a verifier."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import ROOT
from tests.support.proxy import run_spans, settings_for
from tests.support.tracecard import RunningServer, running_tracecard, runtime_of

SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "tool_server.py"), "stdio"]
SUITE = """
schema_version = 1
name = "probe-pool"

[[tasks]]
id = "note"
instruction = "Write the note 'k'."
upstreams = ["notes"]

[tasks.outcome]
probes = [
  { id = "note", kind = "tool", upstream = "notes", tool = "read_note", arguments = { key = "k" } },
]
predicates = [{ probe = "note", path = "$.structuredContent.text", op = "eq", value = "done" }]
"""


async def _write_note(url: str) -> None:
    """The agent: writes the note the probe reads back (the official SDK client)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            await client.call_tool("write_note", {"key": "k", "text": "done"})


def _finish(server: RunningServer, write: bool) -> dict[str, Any]:
    """A run of the task (the agent writes the note, or not); its outcome score."""
    with httpx.Client(base_url=server.url, timeout=60) as http:
        run = http.post(
            "/api/runs", json={"suite": "probe-pool", "task_id": "note", "config": {"name": "a"}}
        ).json()
        if write:
            asyncio.run(_write_note(run["urls"]["notes"]))
        finished = http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "ok"})
        assert finished.status_code == 200, finished.text
    scores = {s["component"]: s for s in finished.json()["scores"]}
    return {"id": run["id"], "outcome": scores["outcome"]}


def _restart_upstream(server: RunningServer) -> None:
    """Kill the shared stdio process; wait (bounded) until the bridge started a new one."""
    pool = runtime_of(server).stdio.pool  # type: ignore[union-attr]
    old = pool.describe()["shared"]["notes"]
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while pool.describe()["shared"].get("notes") in (old, None):
        assert time.monotonic() < deadline, "the shared upstream did not restart"
        time.sleep(0.1)


def test_probes_share_one_pool_across_runs_restarts_and_close_with_the_server(
    tmp_path: Path,
) -> None:
    with running_tracecard(settings_for({"notes": {"command": SERVER}}, tmp_path)) as server:
        posted = httpx.post(
            f"{server.url}/api/suites",
            content=SUITE,
            headers={"content-type": "application/toml"},
            timeout=30,
        )
        assert posted.status_code == 201, posted.text
        probe_http = runtime_of(server).probe_http
        assert probe_http is not None and probe_http.pool is None  # opened on the first probe
        first = _finish(server, write=True)
        assert first["outcome"]["value"] == 1.0
        pool = probe_http.pool
        assert pool is not None
        for _ in range(25):  # the note stays: every probe sees it, over the same pool
            assert _finish(server, write=False)["outcome"]["value"] == 1.0
        assert probe_http.pool is pool
        assert 1 <= len(pool._pool.connections) <= 2  # kept alive and reused, not one per probe
        _restart_upstream(server)  # a fresh process: the note is gone, the probe still runs
        after = _finish(server, write=False)
        assert after["outcome"]["value"] == 0.0  # evaluated: the probe ran and saw no note
        assert _finish(server, write=True)["outcome"]["value"] == 1.0
        assert probe_http.pool is pool
        spans = run_spans(server.url, after["id"])
        (probe,) = [s for s in spans if "tracecard.probe.id" in s["attributes"]]
        assert probe["attributes"]["tracecard.role"] == "verifier"
        assert all("Tracecard-Verifier" not in str(value) for value in pool.__dict__.values())
    assert probe_http.closed is True
    assert pool._pool.connections == []  # closed at shutdown
