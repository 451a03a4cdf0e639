"""A shared stdio process has one handshake, but each agent keeps its own capabilities.

Real tracecard (uvicorn), the SDK test server over stdio (tests/servers/tool_server.py, its
`ask_name` tool sends an elicitation request to the client), the official `mcp` client for the
agent that declares elicitation, raw HTTP for one that does not.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import ROOT
from tests.support.proxy import tracecard_for
from tests.support.tracecard import RunningServer

SDK_SERVER = ROOT / "tests" / "servers" / "tool_server.py"
ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # one process for every agent (no per_run); a short timeout bounds a request nobody answers
    upstreams: dict[str, Any] = {
        "shared": {"command": [sys.executable, str(SDK_SERVER), "stdio"], "timeout_s": 15}
    }
    with tracecard_for(upstreams, tmp_path_factory.mktemp("stdio-handshake")) as running:
        yield running


def _raw_agent(url: str, capabilities: dict[str, Any]) -> dict[str, str]:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    answer = httpx.post(url, json=hello, headers=ACCEPT, timeout=60)
    assert answer.status_code == 200, answer.text
    return {"mcp-session-id": answer.headers["mcp-session-id"], **ACCEPT}


def test_server_requests_reach_only_agents_that_declared_the_capability(
    tracecard: RunningServer, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    url = f"{tracecard.url}/mcp/shared"
    asked: list[str] = []

    async def elicited(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "agent A"})

    async def second_agent_while_a_listens() -> tuple[str, str]:
        async with httpx2.AsyncClient(timeout=60) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="legacy", elicitation_callback=elicited) as first:
                # A started the shared process: its handshake declared A's elicitation
                answer = await first.call_tool("ask_name", {})
                a_text = str(answer.content[0].text)  # type: ignore[union-attr]
                # B declares sampling only, while A (which would answer) still listens
                session = await asyncio.to_thread(_raw_agent, url, {"sampling": {}})
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
                call["params"] = {"name": "ask_name", "arguments": {}}  # type: ignore[assignment]
                streamed = await asyncio.to_thread(
                    httpx.post, url, json=call, headers=session, timeout=60
                )
                return a_text, streamed.text

    with caplog.at_level(logging.WARNING, logger="tracecard.server.stdio.handshake"):
        a_text, b_stream = asyncio.run(second_agent_while_a_listens())
    assert a_text == "accept: agent A" and asked == ["Your name?"]  # A answered only its own
    messages = [
        json.loads(line.removeprefix("data: "))
        for line in b_stream.splitlines()
        if line.startswith("data: ")
    ]
    assert not any(m.get("method") == "elicitation/create" for m in messages)  # B never asked
    text = messages[-1]["result"]["content"][0]["text"]
    assert text.startswith("refused:") and "no waiting agent declared this capability" in text
    warned = [r.getMessage() for r in caplog.records]
    assert any("shared" in m and "also declares sampling" in m for m in warned), warned
