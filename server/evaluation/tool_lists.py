"""Ask each configured upstream for its tools (`tools/list`), to check a suite against them.

HTTP MCP servers are asked directly (not through the proxy: a check is not a run and records
nothing); stdio servers are started for the check (in a scratch sandbox, with the upstream's
fixture, when the command needs `{sandbox}`) and stopped. A server that cannot be reached is
reported with the reason, never as "no tools". Plain HTTP upstreams have no tool list.
A running server keeps each answer for `tool_list_ttl_s` (`ToolListCache`).
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
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

__all__ = ["ToolListCache", "ToolListings", "check_suite_tools", "list_upstream_tools"]

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


class ToolListCache:
    """Each upstream's tool list, kept `ttl_s` seconds, keyed by the upstream's whole config.

    A server process asks each upstream at most once per TTL (stdio servers are not started
    again for every experiment); a changed config (command, URL, env, fixture...) is a new key
    and is asked again. Failures are never cached. Concurrent checks of one upstream share one
    request.
    """

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[str, tuple[float, dict[str, dict[str, Any]]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @staticmethod
    def key(upstream: UpstreamSettings) -> str:
        config = upstream.model_dump_json().encode()
        return hashlib.sha256(config).hexdigest()

    def fresh(self, upstream: UpstreamSettings) -> dict[str, dict[str, Any]] | None:
        entry = self._entries.get(self.key(upstream))
        if entry is None or self._clock() - entry[0] >= self.ttl_s:
            return None
        return entry[1]

    async def get(
        self, upstream: UpstreamSettings, fetch: Callable[[], Awaitable[dict[str, dict[str, Any]]]]
    ) -> dict[str, dict[str, Any]]:
        key = self.key(upstream)
        async with self._locks.setdefault(key, asyncio.Lock()):
            cached = self.fresh(upstream)
            if cached is not None:
                return cached
            tools = await fetch()
            if self.ttl_s > 0:
                self._entries[key] = (self._clock(), tools)
            return tools

    def forget(self, upstream: UpstreamSettings) -> None:
        self._entries.pop(self.key(upstream), None)


async def _fetch(upstream: UpstreamSettings) -> dict[str, dict[str, Any]]:
    async with asyncio.timeout(LIST_TIMEOUT_S):
        if upstream.command is not None:
            return await _from_stdio(upstream)
        return await _from_http(upstream)


async def list_upstream_tools(
    settings: Settings, names: list[str], cache: ToolListCache | None = None
) -> ToolListings:
    """The tools of each named upstream (concurrently, each within `LIST_TIMEOUT_S`), from
    `cache` when it holds a fresh answer."""
    found = ToolListings()

    async def one(name: str) -> None:
        upstream = settings.upstreams[name]
        if upstream.kind != "mcp":
            found.tools[name] = None
            return
        try:
            if cache is None:
                found.tools[name] = await _fetch(upstream)
            else:
                found.tools[name] = await cache.get(upstream, lambda: _fetch(upstream))
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
    settings: Settings, suite: Suite, source: str = "", cache: ToolListCache | None = None
) -> tuple[list[ToolFinding], ToolListings]:
    """Findings for every tool the suite names, against the upstreams it uses. With `cache`, an
    unknown tool is checked again against a fresh list before it is reported (the server may
    have gained the tool since it was cached)."""
    used = sorted({u for t in suite.tasks for u in t.upstreams} | _probe_upstreams(suite))
    names = used or sorted(settings.upstreams)
    hidden = {n: settings.upstreams[n].verifier_tools for n in names if n in settings.upstreams}
    cached = {
        n
        for n in names
        if cache is not None
        and n in settings.upstreams
        and cache.fresh(settings.upstreams[n]) is not None
    }
    listings = await list_upstream_tools(settings, names, cache)
    findings = check_tools(suite, listings.names(), source, listings.unreachable, hidden)
    if cache is not None and cached and any(f.level == "error" for f in findings):
        for name in cached:
            cache.forget(settings.upstreams[name])
        listings = await list_upstream_tools(settings, names, cache)
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
