"""`tracecard wrap` spawned by the official `mcp` stdio client around `mcp-server-time`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.processes import ROOT
from tests.support.tracecard import RunningServer, bound_socket, port_of, running_tracecard
from tracecard.server.settings import Settings

TRACECARD = str(ROOT / ".venv" / "bin" / "tracecard")
TIME_SERVER = str(ROOT / ".venv" / "bin" / "mcp-server-time")


def _settings(tmp: Path) -> Settings:
    return Settings(
        db=f"sqlite:///{tmp / 'tracecard.db'}",
        sandbox_root=str(tmp / "sandboxes"),
        recording={"batch_delay_ms": 50},
    )


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_tracecard(_settings(tmp_path_factory.mktemp("wrap"))) as running:
        yield running


def wrapped(server: str, run_id: str | None, spool: Path) -> StdioServerParameters:
    args = ["wrap", "--server", server, "--spool", str(spool), "--upstream", "time"]
    if run_id:
        args += ["--run", run_id]
    return StdioServerParameters(command=TRACECARD, args=[*args, "--", TIME_SERVER])


def spans_of(url: str, run_id: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{url}/api/runs/{run_id}/spans", timeout=30).json()["spans"])


def wait_for_calls(url: str, run_id: str, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    calls: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        calls = [s for s in spans_of(url, run_id) if s["name"].startswith("tools/call")]
        if len(calls) >= count:
            return calls
        time.sleep(0.2)
    raise AssertionError(f"expected {count} tool calls, got {len(calls)}")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_pass_through_and_spans_arrive(
    tracecard: RunningServer, tmp_path: Path, mode: str
) -> None:
    run = httpx.post(f"{tracecard.url}/api/runs", json={"config": {"name": "wrap"}}).json()
    async with Client(wrapped(tracecard.url, run["id"], tmp_path / "spool.jsonl"), mode=mode) as c:
        tools = await c.list_tools()
        assert {"get_current_time", "convert_time"} <= {t.name for t in tools.tools}
        result = await c.call_tool("get_current_time", {"timezone": "UTC"})
        assert "+00:00" in result.content[0].text  # type: ignore[union-attr]
    (call,) = wait_for_calls(tracecard.url, run["id"], 1)
    assert call["name"] == "tools/call get_current_time"
    assert call["attributes"]["network.transport"] == "pipe"
    assert call["attributes"]["tracecard.upstream"] == "time"
    assert "+00:00" in call["attributes"]["gen_ai.tool.call.result"]
    assert call["trace_id"] == run["trace_id"] and call["parent_span_id"] == run["root_span_id"]
    assert not (tmp_path / "spool.jsonl").exists() or not (tmp_path / "spool.jsonl").read_bytes()


async def test_spans_are_spooled_while_tracecard_is_down_and_delivered_after(
    tmp_path: Path,
) -> None:
    sock = bound_socket()  # held, refusing connections, until tracecard starts on it
    url = f"http://127.0.0.1:{port_of(sock)}"
    spool = tmp_path / "spool.jsonl"
    run_id = "wraprun00000001"
    async with Client(wrapped(url, run_id, spool), mode="legacy") as client:
        await client.call_tool("get_current_time", {"timezone": "UTC"})
        # the shipper spools in batches: the handshake's spans may land before the call's
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (
            spool.exists() and b"get_current_time" in spool.read_bytes()
        ):
            await asyncio.sleep(0.1)
        assert spool.read_bytes(), "spans must be spooled while tracecard is unreachable"
        assert b"get_current_time" in spool.read_bytes()
        with running_tracecard(_settings(tmp_path), sock):
            result = await client.call_tool(
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
            )
            assert not result.is_error
            # the spooled span has the run attribute of a run tracecard never heard of: it is
            # kept in an ad-hoc run per trace; find it by its trace
            deadline = time.monotonic() + 20
            names: set[str] = set()
            while (
                time.monotonic() < deadline
                and not {"tools/call get_current_time", "tools/call convert_time"} <= names
            ):
                await asyncio.sleep(0.3)
                names = _all_span_names(tmp_path)
            assert {"tools/call get_current_time", "tools/call convert_time"} <= names
            # the shipper empties the spool after the server has answered, just after the commit
            deadline = time.monotonic() + 10
            while spool.read_bytes() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert not spool.read_bytes(), "the spool is emptied once delivered"


def _all_span_names(tmp_path: Path) -> set[str]:
    from tracecard.traces.store import Store

    store = Store(f"sqlite:///{tmp_path / 'tracecard.db'}")
    try:
        with store.session() as session:
            from sqlalchemy import text

            return {row[0] for row in session.execute(text("select name from spans"))}
    finally:
        store.dispose()


def test_wrap_without_a_command_is_an_error() -> None:
    import subprocess

    done = subprocess.run([TRACECARD, "wrap", "--"], capture_output=True, timeout=30)
    assert done.returncode == 2 and b"give the server command" in done.stderr
    done = subprocess.run(
        [TRACECARD, "wrap", "--server", "http://127.0.0.1:9", "--", "/no/such/server"],
        capture_output=True,
        timeout=30,
        input=b"",
    )
    assert done.returncode == 127 and b"cannot start" in done.stderr


def test_a_line_is_queued_before_its_bytes_reach_the_other_side() -> None:
    """The answer to a request is read by the other direction's thread as soon as the server
    sees the request; if the request were queued after it was passed on, the answer could be
    queued first and the call recorded as unanswered (CI saw this under load)."""
    import os
    import queue
    import threading

    from tracecard.server.cli.wrap import AGENT_TO_SERVER, Line, _pump

    source_r, source_w = os.pipe()
    sink_r, sink_w = os.pipe()
    lines: queue.Queue[Line | None] = queue.Queue()
    pump = threading.Thread(
        target=_pump, args=(source_r, sink_w, AGENT_TO_SERVER, lines), daemon=True
    )
    pump.start()
    queued_when_seen: list[int] = []
    for n in range(200):
        os.write(source_w, b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n)
        received = b""
        while not received.endswith(b"\n"):
            received += os.read(sink_r, 65536)
        queued_when_seen.append(lines.qsize())
        lines.get(timeout=5)
    os.close(source_w)
    pump.join(timeout=10)
    for fd in (source_r, sink_r, sink_w):
        os.close(fd)
    assert queued_when_seen == [1] * 200
