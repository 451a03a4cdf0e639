"""Verifier-only tools (`verifier_tools`): agents neither see nor call them, probes do.

Against the official SDK's server (tests/servers/tool_server.py) over HTTP (SSE and JSON
answers) and over stdio (shared and per-run processes), through a real tracecard: `read_note`
is the upstream's verifier-only tool. An agent (the SDK's client) is not shown it and is refused
when it calls it anyway; the suite's probe reads the note with it; an agent that saved the wrong
note still fails the outcome.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.processes import ROOT, mcp_tool_server
from tests.support.proxy import run_spans, tracecard_for
from tests.support.tracecard import RunningServer, runtime_of
from tracecard.server.proxy.visibility import CODE_UNKNOWN_TOOL
from tracecard.traces import semconv as sc

pytestmark = pytest.mark.slow

TOOL_SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "tool_server.py"), "stdio"]
HIDDEN = ["read_note"]
# (upstream, protocol): "legacy" is the session protocol (2025-11-25; the SDK server answers
# with SSE unless --json), "auto" the stateless one (2026-07-28, JSON answers)
CASES = [
    ("http_sse", "legacy"),
    ("http_sse", "auto"),
    ("http_json", "legacy"),
    ("stdio_shared", "legacy"),
    ("stdio_shared", "auto"),
    ("stdio_per_run", "legacy"),
]

SUITE = """
schema_version = 1
name = "{upstream}"

[[tasks]]
id = "{upstream}"
instruction = "Save the note 'greeting' as 'hello world'."
upstreams = ["{upstream}"]

[[tasks.invocation.calls]]
tool = "write_note"
arguments = {{ key = "greeting", text = "hello world" }}

[[tasks.outcome.probes]]
id = "note"
upstream = "{upstream}"
tool = "read_note"
arguments = {{ key = "greeting" }}

[[tasks.outcome.predicates]]
probe = "note"
path = "$.structuredContent.text"
op = "eq"
value = "hello world"
"""


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("verifier-tools")
    with mcp_tool_server() as sse_url, mcp_tool_server("--json") as json_url:
        upstreams: dict[str, Any] = {
            "http_sse": {"url": sse_url, "verifier_tools": HIDDEN},
            "http_json": {"url": json_url, "verifier_tools": HIDDEN},
            "stdio_shared": {"command": TOOL_SERVER, "verifier_tools": HIDDEN},
            "stdio_per_run": {"command": TOOL_SERVER, "per_run": True, "verifier_tools": HIDDEN},
            "http_open": {"url": sse_url},  # the same server with nothing hidden
        }
        with tracecard_for(upstreams, folder) as running:
            yield running


def _experiment_run(server: RunningServer, upstream: str) -> dict[str, Any]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        suite = SUITE.format(upstream=upstream)
        headers = {"content-type": "application/toml"}
        assert http.post("/api/suites", content=suite, headers=headers).status_code in (201, 200)
        response = http.post(
            "/api/experiments", json={"suite": upstream, "config": {"name": "a"}, "trials": 1}
        )
        assert response.status_code == 201, response.text
        return dict(response.json()["runs"][0])


def _finish(server: RunningServer, run_id: str) -> dict[str, dict[str, Any]]:
    response = httpx.post(f"{server.url}/api/runs/{run_id}/finish", json={}, timeout=60)
    assert response.status_code == 200, response.text
    return {s["component"]: s for s in response.json()["scores"]}


async def _agent(
    url: str, text: str, headers: dict[str, str] | None = None, mode: str = "auto"
) -> dict[str, Any]:
    """An agent that lists the tools, tries the hidden one, then saves the note as `text`."""
    seen: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode) as client:
            seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            try:
                seen["read"] = await client.call_tool("read_note", {"key": "greeting"})
            except MCPError as exc:
                seen["refused"] = exc
            await client.call_tool("write_note", {"key": "greeting", "text": text})
    return seen


@pytest.mark.parametrize(("upstream", "mode"), CASES)
def test_an_agent_neither_sees_nor_calls_a_verifier_tool_and_the_probe_does(
    tracecard: RunningServer, upstream: str, mode: str
) -> None:
    run = _experiment_run(tracecard, upstream)
    seen = asyncio.run(_agent(run["urls"][upstream], "hello world", mode=mode))
    assert "write_note" in seen["tools"] and "read_note" not in seen["tools"]
    assert "read" not in seen, "the agent's call of the hidden tool reached it"
    refused: MCPError = seen["refused"]
    assert refused.error.code == CODE_UNKNOWN_TOOL
    assert refused.error.message == "Unknown tool: read_note"  # nothing says it exists
    scores = _finish(tracecard, run["id"])
    assert scores["outcome"]["value"] == 1.0  # the probe read the note with the hidden tool
    spans = run_spans(tracecard.url, run["id"])
    listed = [
        s
        for s in spans
        if s["attributes"].get(sc.MCP_METHOD_NAME) == "tools/list"
        and s["attributes"][sc.ROLE] == sc.ROLE_AGENT
    ]
    assert listed and all(s["attributes"][sc.TOOLS_HIDDEN] == HIDDEN for s in listed)
    reads = [s for s in spans if s["name"] == "tools/call read_note"]
    agent_reads = [s for s in reads if s["attributes"][sc.ROLE] == sc.ROLE_AGENT]
    assert len(agent_reads) == 1
    refusal = agent_reads[0]
    assert refusal["attributes"][sc.ERROR_TYPE] == sc.ERR_VERIFIER_ONLY
    assert "verifier-only" in refusal["status"]["message"]
    verifier_reads = [s for s in reads if s["attributes"][sc.ROLE] == sc.ROLE_VERIFIER]
    assert len(verifier_reads) == 2  # the probe's own span and the call it made
    assert all(sc.ERROR_TYPE not in s["attributes"] for s in verifier_reads)


@pytest.mark.parametrize(("upstream", "mode"), [CASES[0], CASES[-1]])
def test_a_wrong_agent_still_fails_and_calling_the_hidden_tool_changes_nothing(
    tracecard: RunningServer, upstream: str, mode: str
) -> None:
    run = _experiment_run(tracecard, upstream)
    asyncio.run(_agent(run["urls"][upstream], "goodbye", mode=mode))
    scores = _finish(tracecard, run["id"])
    assert scores["outcome"]["value"] == 0.0
    assert scores["invocation"]["passed"] is False


@pytest.mark.parametrize(("upstream", "mode"), CASES[:4])
def test_verifier_traffic_sees_and_calls_the_hidden_tool(
    tracecard: RunningServer, upstream: str, mode: str
) -> None:
    """What probes present (the database's verifier key) lifts the hiding: tools/list and
    tools/call are the upstream's own."""
    key = {"Tracecard-Verifier": runtime_of(tracecard).verifier_key}
    run = httpx.post(f"{tracecard.url}/api/runs", json={}, timeout=10).json()
    seen = asyncio.run(_agent(run["urls"][upstream], "as verifier", key, mode))
    assert "read_note" in seen["tools"] and "refused" not in seen
    assert seen["read"].is_error is False
    guess = {"Tracecard-Verifier": "guess"}
    forged = asyncio.run(_agent(run["urls"][upstream], "x", guess, mode))
    assert "read_note" not in forged["tools"] and "refused" in forged


def test_an_upstream_without_verifier_tools_shows_everything(tracecard: RunningServer) -> None:
    run = httpx.post(f"{tracecard.url}/api/runs", json={}, timeout=10).json()
    seen = asyncio.run(_agent(run["urls"]["http_open"], "x"))
    assert "read_note" in seen["tools"] and "refused" not in seen
    spans = run_spans(tracecard.url, run["id"])
    assert all(sc.TOOLS_HIDDEN not in s["attributes"] for s in spans)
