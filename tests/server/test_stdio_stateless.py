"""Stateless (2026-07-28) clients of stdio upstreams: their capabilities reach the process.

The npm reference server `server-everything` offers some tools only to a client that declared a
capability (`get-roots-list` with `roots`, `trigger-elicitation-request` with `elicitation`).
A client that declares one lists the same tools from it over stdio, through tracecard's bridge
(the capabilities come in each request's `_meta`), as from the same server over HTTP (where the
client's `initialize` declares them). A shared process declares its first client's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client.client import Client

from tests.support.processes import ROOT, free_port, spawn
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.server.settings import Settings

NODE = str(ROOT / "node_modules" / ".bin" / "node")
EVERYTHING = str(
    ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)


async def _roots(_context: Any) -> Any:
    raise AssertionError("not asked in these tests")


async def _elicit(_context: Any, _params: Any) -> Any:
    raise AssertionError("not asked in these tests")


ROOTS = {"list_roots_callback": _roots}
ELICITATION = {"elicitation_callback": _elicit}


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    """server-everything over streamable HTTP, asked directly (no tracecard)."""
    port = free_port()
    with spawn([NODE, EVERYTHING, "streamableHttp"], port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("stateless")
    command = [NODE, EVERYTHING, "stdio"]
    settings = Settings(
        db=f"sqlite:///{tmp / 'tracecard.db'}",
        sandbox_root=str(tmp / "sandboxes"),
        upstreams={
            "everything": {"command": command},
            "everything_run": {"command": command, "per_run": True},
        },
        recording={"batch_delay_ms": 50},
    )
    with running_tracecard(settings) as running:
        running.settings.config_path = None
        yield running


async def _tools(url: str, callbacks: dict[str, Any]) -> tuple[str | None, list[str]]:
    async with Client(url, **callbacks) as client:
        listed = await client.list_tools()
        return client.session.protocol_version, sorted(t.name for t in listed.tools)


def _run(server: RunningServer) -> str:
    import httpx

    response = httpx.post(f"{server.url}/api/runs", json={"config": {"name": "caps"}})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_capabilities_reach_the_stdio_process(
    tracecard: RunningServer, everything_http: str
) -> None:
    # directly over HTTP the client's initialize declares them (session protocol: the
    # TypeScript server answers no server/discover)
    _, direct_roots = await _tools(everything_http, ROOTS)
    _, direct_elicit = await _tools(everything_http, ELICITATION)
    _, direct_none = await _tools(everything_http, {})
    assert "get-roots-list" in direct_roots and "get-roots-list" not in direct_none
    assert "trigger-elicitation-request" in direct_elicit

    # through the bridge the same client speaks the stateless protocol: _meta carries them
    shared = f"{tracecard.url}/mcp/everything"
    version, first = await _tools(shared, ROOTS)
    assert version == "2026-07-28"
    assert first == direct_roots  # 14 = 14 (13 before: the process declared nothing)

    # a shared process keeps its first client's handshake: a later client with other
    # capabilities sees that list (docs/stdio.md), not the one it would get alone
    _, later = await _tools(shared, ELICITATION)
    assert later == direct_roots and later != direct_elicit

    # per_run: each run's process declares its own client's capabilities
    for callbacks, direct in ((ELICITATION, direct_elicit), ({}, direct_none)):
        url = f"{tracecard.url}/runs/{_run(tracecard)}/mcp/everything_run"
        assert (await _tools(url, callbacks))[1] == direct
