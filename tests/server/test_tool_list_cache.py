"""The suite check's tools/list answers are kept per upstream config: creating experiments does
not start a stdio server every time; a changed config, an expired entry or a tool missing from
a kept list is asked again. Real stdio servers (official `mcp` SDK), counted by their starts."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import ROOT
from tests.support.proxy import tracecard_for
from tracecard.scorers import parse_suite
from tracecard.server.evaluation.tool_lists import (
    ToolListCache,
    check_suite_tools,
    list_upstream_tools,
)
from tracecard.server.settings import Settings

SERVER = str(ROOT / "tests" / "servers" / "tool_server.py")

SUITE = """
schema_version = 1
name = "cached"

[[tasks]]
id = "t"
instruction = "save a note"
upstreams = ["notes"]

[[tasks.invocation.calls]]
tool = "write_note"
"""


def counted(log: Path, **extra: Any) -> dict[str, Any]:
    """A stdio upstream that appends a line to `log` each time it is started."""
    script = 'echo start >> "$0"; exec "$1" "$2" stdio'
    return {"command": ["sh", "-c", script, str(log), sys.executable, SERVER], **extra}


def starts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_second_experiment_does_not_start_the_server_again(tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    with tracecard_for({"notes": counted(log)}, tmp_path) as server:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            posted = http.post(
                "/api/suites", content=SUITE, headers={"content-type": "application/toml"}
            )
            assert posted.status_code == 201, posted.text
            before = starts(log)
            body = {"suite": "cached", "config": {"name": "a"}, "trials": 1}
            assert http.post("/api/experiments", json=body).status_code == 201
            after_first = starts(log)
            assert after_first == before + 1  # the check started it once
            assert http.post("/api/experiments", json=body).status_code == 201
            assert starts(log) == after_first  # kept: not started again
            typo = SUITE.replace("write_note", "write_nope").replace("cached", "typo")
            http.post("/api/suites", content=typo, headers={"content-type": "application/toml"})
            refused = http.post("/api/experiments", json={**body, "suite": "typo"})
            assert refused.status_code == 422 and "write_nope" in refused.text
            assert starts(log) == after_first + 1  # an unknown tool is checked on a fresh list


def test_a_changed_config_and_an_expired_entry_are_asked_again(tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    now = [0.0]
    cache = ToolListCache(ttl_s=300, clock=lambda: now[0])
    first = Settings(upstreams={"notes": counted(log, env={"MODE": "a"})})
    changed = Settings(upstreams={"notes": counted(log, env={"MODE": "b"})})

    def tools(settings: Settings) -> list[str] | None:
        listings = asyncio.run(list_upstream_tools(settings, ["notes"], cache))
        assert listings.unreachable == {}
        return listings.names()["notes"]

    assert "write_note" in (tools(first) or [])
    assert tools(first) and starts(log) == 1
    assert tools(changed) and starts(log) == 2  # another config: asked
    assert tools(first) and starts(log) == 2  # the first one is still kept
    now[0] = 301.0
    assert tools(first) and starts(log) == 3  # expired: asked again


def test_failures_are_not_kept(tmp_path: Path) -> None:
    cache = ToolListCache(ttl_s=300)
    missing = Settings(upstreams={"notes": {"command": [str(tmp_path / "no-such-server")]}})
    for _ in range(2):
        listings = asyncio.run(list_upstream_tools(missing, ["notes"], cache))
        assert "notes" in listings.unreachable
    assert cache.fresh(missing.upstreams["notes"]) is None


def test_a_stale_list_never_refuses_a_tool_the_server_has(tmp_path: Path) -> None:
    settings = Settings(upstreams={"notes": counted(tmp_path / "starts.log")})
    cache = ToolListCache(ttl_s=300)

    async def stale() -> dict[str, dict[str, Any]]:
        return {"echo": {"name": "echo"}}  # what the server listed before it gained write_note

    async def check() -> list[str]:
        await cache.get(settings.upstreams["notes"], stale)
        findings, _ = await check_suite_tools(settings, parse_suite(SUITE, "toml"), "s", cache)
        return [f.message for f in findings if f.level == "error"]

    assert asyncio.run(check()) == []
    assert "write_note" in (cache.fresh(settings.upstreams["notes"]) or {})


def test_a_stdio_server_starts_when_stderr_has_no_file_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As under a test's capture or in a notebook: the server's stderr goes to the process's
    own, not to a stream it cannot be handed (the SDK's default is `sys.stderr` as it was at
    import, which failed with `UnsupportedOperation: fileno`)."""
    from mcp.client.stdio import stdio_client

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    # as if the SDK had been imported under that capture: its default `errlog` is that stream
    monkeypatch.setattr(stdio_client.__wrapped__, "__defaults__", (io.StringIO(),))
    settings = Settings(upstreams={"notes": counted(tmp_path / "starts.log")})
    listings = asyncio.run(list_upstream_tools(settings, ["notes"]))
    assert listings.unreachable == {}
    assert "write_note" in (listings.tools["notes"] or {})
