"""#14.17: a per-run stdio server's start-up time is visible in the trace: the `initialize`
span tracecard sends it starts at the spawn and ends at its answer."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.tracecard import await_flush, running_tracecard
from tracecard.server.settings import Settings
from tracecard.traces import semconv as sc
from tracecard.traces.store import Store

VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


def test_the_startup_span_covers_spawn_to_initialize(tmp_path: Path) -> None:
    settings = Settings(
        db=f"sqlite:///{tmp_path / 't.db'}",
        sandbox_root=str(tmp_path / "sandboxes"),
        upstreams={
            "time": {
                "command": [str(VENV_BIN / "mcp-server-time"), "--local-timezone", "UTC"],
                "per_run": True,
            }
        },
        recording={"batch_delay_ms": 50},
    )
    with running_tracecard(settings) as running:
        runs = [httpx.post(f"{running.url}/api/runs", json={}).json()["id"] for _ in range(2)]
        accept = {"Accept": "application/json, text/event-stream"}
        for run_id in runs:
            url = f"{running.url}/runs/{run_id}/mcp/time"
            hello = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
            started = httpx.post(url, json=hello, headers=accept, timeout=60)
            assert started.status_code == 200, started.text
            session = {**accept, "Mcp-Session-Id": started.headers.get("mcp-session-id", "")}
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            answer = httpx.post(url, json=listing, headers=session, timeout=60)
            assert answer.status_code == 200, answer.text
        await_flush(running)
        store = Store(settings.db)
        for run_id in runs:  # one fresh process per run, each with its start-up span
            spans = store.spans_for_run(run_id)
            startup = [s for s in spans if s["attributes"].get(sc.UPSTREAM_STARTUP)]
            assert len(startup) == 1, [s["name"] for s in spans]
            (span,) = startup
            assert span["name"].startswith("initialize")
            took_ms = (span["end_time_unix_nano"] - span["start_time_unix_nano"]) / 1e6
            assert took_ms > 50  # a Python MCP server does not start in less
            listing = next(s for s in spans if s["name"].startswith("tools/list"))
            assert span["start_time_unix_nano"] < listing["start_time_unix_nano"]
        store.dispose()
