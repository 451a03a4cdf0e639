"""Sessions of stdio upstreams: bounded like the proxy's, and ad-hoc runs grouped by session.

Real tracecard (uvicorn), real stdio servers (PyPI `mcp-server-time`, npm filesystem), the
official `mcp` client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from sqlmodel import select

from tests.support.processes import ROOT
from tests.support.tracecard import RunningServer, await_flush, running_tracecard, runtime_of
from tracecard.server.settings import Settings
from tracecard.server.stdio import StdioBridge
from tracecard.traces.models import SpanRow

VENV_BIN = ROOT / ".venv" / "bin"
SDK_SERVER = ROOT / "tests" / "servers" / "tool_server.py"
NODE_BIN = ROOT / "node_modules" / ".bin"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("stdio-sessions")
    fixture = tmp / "fixture"
    fixture.mkdir()
    (fixture / "hello.txt").write_text("hello\n")
    upstreams: dict[str, Any] = {
        "time": {"command": [str(VENV_BIN / "mcp-server-time"), "--local-timezone", "UTC"]},
        "sdk": {"command": [sys.executable, str(SDK_SERVER), "stdio"], "per_run": True},
        "files": {
            "command": [str(NODE_BIN / "mcp-server-filesystem"), "{sandbox}"],
            "per_run": True,
            "fixture": str(fixture),
        },
    }
    settings = Settings(
        db=f"sqlite:///{tmp / 'tracecard.db'}",
        sandbox_root=str(tmp / "sandboxes"),
        upstreams=upstreams,
        recording={"batch_delay_ms": 50},
    )
    with running_tracecard(settings) as running:
        yield running


def _open_session(server: RunningServer, upstream: str) -> str:
    response = httpx.post(f"{server.url}/mcp/{upstream}", json=INIT, headers=ACCEPT, timeout=60)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def _list_tools(server: RunningServer, upstream: str, session: str) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    headers = {"mcp-session-id": session, "accept": "application/json"}
    return httpx.post(f"{server.url}/mcp/{upstream}", json=message, headers=headers, timeout=60)


@contextlib.contextmanager
def _bridge_with_capacity(server: RunningServer, capacity: int) -> Iterator[StdioBridge]:
    bridge = runtime_of(server).stdio
    assert bridge is not None
    saved, bridge.sessions.capacity = bridge.sessions.capacity, capacity
    try:
        yield bridge
    finally:
        bridge.sessions.capacity = saved


def test_stdio_sessions_are_lru_bounded(tracecard: RunningServer) -> None:
    """Clients that never DELETE do not grow the bridge: the least recently used session goes."""
    with _bridge_with_capacity(tracecard, 2) as bridge:
        first, second = _open_session(tracecard, "time"), _open_session(tracecard, "time")
        assert _list_tools(tracecard, "time", first).status_code == 200  # first: recently used
        third = _open_session(tracecard, "time")
        assert len(bridge.sessions) == 2
        assert _list_tools(tracecard, "time", second).status_code == 404  # evicted
        assert _list_tools(tracecard, "time", first).status_code == 200
        assert _list_tools(tracecard, "time", third).status_code == 200


def test_an_evicted_ad_hoc_session_stops_its_per_run_process(tracecard: RunningServer) -> None:
    with _bridge_with_capacity(tracecard, 1) as bridge:
        first = _open_session(tracecard, "files")
        first_run = bridge.sessions.get(first).run.id  # type: ignore[union-attr]
        assert any(key[1] == first_run for key in bridge.pool.per_run)
        _open_session(tracecard, "files")  # evicts the first session
        assert _list_tools(tracecard, "files", first).status_code == 404
        assert not any(key[1] == first_run for key in bridge.pool.per_run)


async def test_a_session_initialize_lands_in_that_session_run(tracecard: RunningServer) -> None:
    """Ad hoc: one run per session, holding the session's handshake as well as its calls."""
    for _session in range(2):
        async with Client(f"{tracecard.url}/mcp/time", mode="legacy") as client:
            arguments = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"}
            assert not (await client.call_tool("convert_time", arguments)).is_error
    await_flush(tracecard)
    with runtime_of(tracecard).store.session() as session:
        spans = [
            span
            for span in session.scalars(select(SpanRow)).all()
            if span.attributes.get("tracecard.upstream") == "time"
        ]
    call_runs = {s.run_id for s in spans if s.name == "tools/call convert_time"}
    assert len(call_runs) == 2  # two sessions, two runs
    for run_id in call_runs:  # each session's run holds its own handshake
        methods = [s.attributes["mcp.method.name"] for s in spans if s.run_id == run_id]
        assert methods.count("initialize") == 1, methods
        assert methods.count("notifications/initialized") == 1, methods


def test_the_agent_capabilities_reach_the_server_and_events_carry_ids(
    tracecard: RunningServer,
) -> None:
    """The process's handshake declares the agent's capabilities (sampling, elicitation...),
    the agent gets the server's real ones, and SSE events have ids."""
    run = httpx.post(f"{tracecard.url}/api/runs", json={}, timeout=30).json()
    url = run["urls"]["sdk"]
    declared = {"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": True}}
    hello = {**INIT, "params": {**INIT["params"], "capabilities": declared}}  # type: ignore[dict-item]
    answer = httpx.post(url, json=hello, headers=ACCEPT, timeout=60)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert (
        result["serverInfo"]["name"] == "tracecard-test-tools" and "tools" in result["capabilities"]
    )
    session = {"mcp-session-id": answer.headers["mcp-session-id"], **ACCEPT}
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
    call["params"] = {"name": "client_capabilities", "arguments": {}}  # type: ignore[assignment]
    streamed = httpx.post(url, json=call, headers=session, timeout=60)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    lines = streamed.text.splitlines()
    assert any(line.startswith("id: ") for line in lines), streamed.text
    data = next(line.removeprefix("data: ") for line in lines if line.startswith("data: "))
    seen = json.loads(json.loads(data)["result"]["content"][0]["text"])
    assert seen["sampling"] == {} and seen["elicitation"] == {"form": {}}
    assert seen["roots"] == {"listChanged": True}


def _adhoc_run_of(bridge: StdioBridge, session: str) -> str:
    found = bridge.sessions.get(session)
    assert found is not None
    return found.run.id


def test_ad_hoc_per_run_processes_are_capped(tracecard: RunningServer) -> None:
    """Clients that never finish a run cannot pile up processes: past the cap the LRU goes."""
    with _bridge_with_capacity(tracecard, 10_000) as bridge:
        reaper = bridge.pool.reaper
        saved, reaper.adhoc_max = reaper.adhoc_max, 2
        try:
            runs = [_adhoc_run_of(bridge, _open_session(tracecard, "files")) for _ in range(3)]
        finally:
            reaper.adhoc_max = saved
        running = {key[1] for key, slot in bridge.pool.per_run.items() if slot.process}
        assert runs[0] not in running and {runs[1], runs[2]} <= running


def test_a_run_finished_elsewhere_stops_its_per_run_process(tracecard: RunningServer) -> None:
    """Another replica finished the run (the database says so): this one stops its process."""
    bridge = runtime_of(tracecard).stdio
    assert bridge is not None
    run = httpx.post(f"{tracecard.url}/api/runs", json={}, timeout=30).json()
    answer = httpx.post(run["urls"]["files"], json=INIT, headers=ACCEPT, timeout=60)
    assert answer.status_code == 200
    process = bridge.pool.per_run[("files", run["id"])].process
    assert process is not None and process.alive
    runtime_of(tracecard).store.update_run(run["id"], status="finished")  # as a replica would
    reaper = bridge.pool.reaper
    assert reaper._task is not None
    saved, reaper.check_idle_s = reaper.check_idle_s, 0.0
    try:
        asyncio.run_coroutine_threadsafe(reaper.sweep(), reaper._task.get_loop()).result(30)
    finally:
        reaper.check_idle_s = saved
    assert ("files", run["id"]) not in bridge.pool.per_run
    deadline = time.monotonic() + 30  # the stop runs on the server's loop
    while process.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process.alive
