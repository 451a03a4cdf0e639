"""Ask each configured upstream for its tools (`tools/list`), to check a suite against them.

HTTP MCP servers are asked directly (not through the proxy: a check is not a run and records
nothing); stdio servers are started for the check (in a scratch sandbox, with the upstream's
fixture, when the command needs `{sandbox}`) and stopped. A server that cannot be reached is
reported with the reason, never as "no tools". Plain HTTP upstreams have no tool list.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tracecard.scorers import Suite
from tracecard.scorers.tool_check import ToolFinding, check_tools
from tracecard.server.runs.sandbox import substitute
from tracecard.server.settings import Settings, UpstreamSettings

__all__ = ["ToolListings", "check_suite_tools", "list_upstream_tools"]

LIST_TIMEOUT_S = 20.0


@dataclass
class ToolListings:
    """Each upstream's tools (name -> definition), or why it could not be asked."""

    tools: dict[str, dict[str, dict[str, Any]] | None] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)

    def names(self) -> dict[str, list[str] | None]:
        return {k: (None if v is None else sorted(v)) for k, v in self.tools.items()}


async def _list(client: Client) -> dict[str, dict[str, Any]]:
    listed = await client.list_tools()
    return {
        t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
    }


async def _from_stdio(upstream: UpstreamSettings) -> dict[str, dict[str, Any]]:
    command = upstream.command or []
    with tempfile.TemporaryDirectory(prefix="tracecard-toolcheck-") as scratch:
        sandbox = Path(scratch)
        if upstream.fixture and Path(upstream.fixture).is_dir():
            shutil.copytree(upstream.fixture, sandbox, dirs_exist_ok=True)
        params = StdioServerParameters(
            command=substitute(command[0], sandbox),
            args=[substitute(a, sandbox) for a in command[1:]],
            env={k: substitute(v, sandbox) for k, v in upstream.env.items()} or None,
            cwd=substitute(upstream.cwd, sandbox) if upstream.cwd else None,
        )
        async with Client(params) as client:
            return await _list(client)


async def _from_http(upstream: UpstreamSettings) -> dict[str, dict[str, Any]]:
    async with httpx2.AsyncClient(headers=upstream.headers, timeout=LIST_TIMEOUT_S) as http:
        async with Client(streamable_http_client(upstream.url or "", http_client=http)) as client:
            return await _list(client)


async def list_upstream_tools(settings: Settings, names: list[str]) -> ToolListings:
    """The tools of each named upstream (concurrently, each within `LIST_TIMEOUT_S`)."""
    found = ToolListings()

    async def one(name: str) -> None:
        upstream = settings.upstreams[name]
        if upstream.kind != "mcp":
            found.tools[name] = None
            return
        try:
            async with asyncio.timeout(LIST_TIMEOUT_S):
                if upstream.command is not None:
                    found.tools[name] = await _from_stdio(upstream)
                else:
                    found.tools[name] = await _from_http(upstream)
        except Exception as exc:  # noqa: BLE001 - any failure: say so and carry on
            found.unreachable[name] = _reason(exc)

    await asyncio.gather(*(one(n) for n in names if n in settings.upstreams))
    return found


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return f"no answer within {LIST_TIMEOUT_S:g}s"
    return f"{type(exc).__name__}: {exc}"[:300]


async def check_suite_tools(
    settings: Settings, suite: Suite, source: str = ""
) -> tuple[list[ToolFinding], ToolListings]:
    """Findings for every tool the suite names, against the upstreams it uses."""
    used = sorted({u for t in suite.tasks for u in t.upstreams} | _probe_upstreams(suite))
    names = used or sorted(settings.upstreams)
    listings = await list_upstream_tools(settings, names)
    hidden = {n: settings.upstreams[n].verifier_tools for n in names if n in settings.upstreams}
    findings = check_tools(suite, listings.names(), source, listings.unreachable, hidden)
    return findings, listings


def _probe_upstreams(suite: Suite) -> set[str]:
    found: set[str] = set()
    for task in suite.tasks:
        for outcome in [task.outcome, *(turn.outcome for turn in task.turns)]:
            for probe in outcome.probes if outcome is not None else []:
                upstream = getattr(probe, "upstream", None)
                if isinstance(upstream, str):
                    found.add(upstream)
    return found
