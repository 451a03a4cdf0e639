"""Spans fan out to an OTLP collector through the standard exporter — here, a second tracecard,
whose OTLP ingest is itself a real collector endpoint."""

from __future__ import annotations

from pathlib import Path

import httpx
from mcp.client.client import Client

from tests.support.processes import mcp_tool_server
from tests.support.tracecard import running_tracecard
from tracecard.server.settings import Settings
from tracecard.traces.store import Store


def _settings(folder: Path, **extra: object) -> Settings:
    return Settings.model_validate(
        {
            "db": f"sqlite:///{folder / 'tracecard.db'}",
            "sandbox_root": str(folder / "sandboxes"),
            "recording": {"batch_delay_ms": 50, **extra.pop("recording", {})},  # type: ignore[dict-item]
            **extra,
        }
    )


async def test_every_span_also_reaches_the_configured_collector(tmp_path: Path) -> None:
    (tmp_path / "collector").mkdir()
    (tmp_path / "proxy").mkdir()
    with mcp_tool_server() as upstream, running_tracecard(_settings(tmp_path / "collector")) as b:
        settings = _settings(
            tmp_path / "proxy",
            upstreams={"tools": {"url": upstream}},
            recording={"otlp_endpoint": f"{b.url}/v1/traces"},
        )
        with running_tracecard(settings) as a:
            async with httpx.AsyncClient(base_url=a.url, timeout=30) as http:
                run = (await http.post("/api/runs", json={"config": {"name": "fan"}})).json()
                async with Client(run["urls"]["tools"]) as client:
                    await client.call_tool("add", {"a": 1, "b": 2})
                await http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "3"})
        # leaving `a` shut it down, which flushed both of its span processors
        collected = Store(b.settings.db)
        with collected.engine.connect() as connection:
            rows = connection.exec_driver_sql(
                "SELECT name FROM spans WHERE trace_id = ?", (run["trace_id"],)
            ).all()
        names = {row[0] for row in rows}
    assert {"tools/call add", "invoke_agent fan"} <= names
