"""Ask each configured upstream for its tools (`tools/list`), to check a suite against them.

HTTP MCP servers are asked directly (not through the proxy: a check is not a run and records
nothing); stdio servers are started for the check (in a scratch sandbox, with the upstream's
fixture, when the command needs `{sandbox}`) and stopped. A server that cannot be reached is
reported with the reason, never as "no tools". Plain HTTP upstreams have no tool list.
A running server keeps each answer for `tool_list_ttl_s` (`ToolListCache`).

A per-task upstream (its command, env or cwd uses `{task.NAME}`, e.g. BFCL's per-run server)
is started once per distinct set of the parameters it uses, with the params of the first task
that has that set, and each task is checked against the list its own params gave: at most
`MAX_PARAM_SETS` sets per check, in task order. The tasks of further sets are not checked
against that upstream (a warning names them); an `info` finding says which tasks' params were
used.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import httpx2

from tracecard.scorers import Suite, Task
from tracecard.scorers.tool_check import ToolFinding, check_tools
from tracecard.server.runs.sandbox import TASK_PARAM, file_probe_findings, substitute
from tracecard.server.settings import Settings, UpstreamSettings

if TYPE_CHECKING:  # the MCP client loads when a list is asked for, not at every start
    from mcp.client.client import Client

__all__ = ["ToolListCache", "ToolListings", "check_suite_tools", "list_upstream_tools"]

LIST_TIMEOUT_S = 20.0
MAX_PARAM_SETS = 4  # distinct task parameter sets a check starts a per-task upstream with

Params = dict[str, str]


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


def _errlog() -> TextIO:
    """Where a stdio upstream's stderr goes: this process's, as it is now. The SDK's default is
    `sys.stderr` as it was when `mcp.client.stdio` was imported, which may be a stream with no
    file descriptor (a test's capture, a notebook's): the server could then not start at all."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            continue
    return _devnull()


@functools.cache
def _devnull() -> TextIO:
    """One handle on the null device for the process's lifetime (not one per tool check)."""
    return open(os.devnull, "w")  # noqa: SIM115 - kept open on purpose


async def _from_stdio(
    upstream: UpstreamSettings, task_params: Params | None, turns: int = 1
) -> dict[str, dict[str, Any]]:
    """A stdio upstream's tools; with a `turn_tool`, those it lists in any of `turns` turns
    (it is told each turn as a run's process would be: a function a later turn reveals is
    one the suite may name)."""
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = upstream.command or []
    with tempfile.TemporaryDirectory(prefix="tracecard-toolcheck-") as scratch:
        sandbox = Path(scratch)
        if upstream.fixture and Path(upstream.fixture).is_dir():
            shutil.copytree(upstream.fixture, sandbox, dirs_exist_ok=True)
        params = StdioServerParameters(
            command=substitute(command[0], sandbox, task_params),
            args=[substitute(a, sandbox, task_params) for a in command[1:]],
            env={k: substitute(v, sandbox, task_params) for k, v in upstream.env.items()} or None,
            cwd=substitute(upstream.cwd, sandbox, task_params) if upstream.cwd else None,
        )
        async with Client(stdio_client(params, errlog=_errlog())) as client:
            tools = await _list(client)
            if upstream.turn_tool in tools:  # a scratch process: its turns may be told
                for turn in range(1, turns):
                    told = await client.call_tool(upstream.turn_tool, {"turn": turn})
                    if told.is_error:
                        break
                    tools |= await _list(client)
            return tools


async def _from_http(upstream: UpstreamSettings) -> dict[str, dict[str, Any]]:
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

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
    def key(upstream: UpstreamSettings, params: Params | None = None) -> str:
        """The upstream's whole config and, for a per-task upstream, the task params it was
        started with (another task's params may give other tools)."""
        config = upstream.model_dump_json().encode()
        if params:
            config += b"\0" + json.dumps(params, sort_keys=True).encode()
        return hashlib.sha256(config).hexdigest()

    def fresh(
        self, upstream: UpstreamSettings, params: Params | None = None
    ) -> dict[str, dict[str, Any]] | None:
        entry = self._entries.get(self.key(upstream, params))
        if entry is None or self._clock() - entry[0] >= self.ttl_s:
            return None
        return entry[1]

    async def get(
        self,
        upstream: UpstreamSettings,
        fetch: Callable[[], Awaitable[dict[str, dict[str, Any]]]],
        params: Params | None = None,
    ) -> dict[str, dict[str, Any]]:
        key = self.key(upstream, params)
        async with self._locks.setdefault(key, asyncio.Lock()):
            cached = self.fresh(upstream, params)
            if cached is not None:
                return cached
            tools = await fetch()
            if self.ttl_s > 0:
                self._entries[key] = (self._clock(), tools)
            return tools

    def forget(self, upstream: UpstreamSettings, params: Params | None = None) -> None:
        self._entries.pop(self.key(upstream, params), None)


async def _fetch(
    upstream: UpstreamSettings, params: Params | None, turns: int = 1
) -> dict[str, dict[str, Any]]:
    async with asyncio.timeout(LIST_TIMEOUT_S):
        if upstream.command is not None:
            return await _from_stdio(upstream, params, turns)
        return await _from_http(upstream)  # never told turns: a check changes nothing there


async def list_upstream_tools(
    settings: Settings,
    names: list[str],
    cache: ToolListCache | None = None,
    params: Mapping[str, Params] | None = None,
    turns: int = 1,
) -> ToolListings:
    """The tools of each named upstream (concurrently, each within `LIST_TIMEOUT_S`), from
    `cache` when it holds a fresh answer. `params`: the task params to start each per-task
    upstream with; `turns`: the most turns a task has (for a stdio upstream's `turn_tool`)."""
    found = ToolListings()

    async def one(name: str) -> None:
        upstream = settings.upstreams[name]
        if upstream.kind != "mcp":
            found.tools[name] = None
            return
        given = (params or {}).get(name)
        try:
            if cache is None:
                found.tools[name] = await _fetch(upstream, given, turns)
            else:
                found.tools[name] = await cache.get(
                    upstream, lambda: _fetch(upstream, given, turns), given
                )
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


def _param_names(upstream: UpstreamSettings) -> list[str]:
    """The `{task.NAME}` parameters the upstream's command, env and cwd use."""
    values = [*(upstream.command or []), *upstream.env.values(), upstream.cwd or ""]
    return sorted({name for value in values for name in TASK_PARAM.findall(value)})


def _param_sets(
    suite: Suite, settings: Settings, per_task: list[str], names: list[str]
) -> list[tuple[dict[str, Params], list[Task]]]:
    """The suite's tasks grouped by the params each per-task upstream they use would be
    started with (task order; a task that lacks a param keeps the gap: the start says so)."""
    groups: dict[str, tuple[dict[str, Params], list[Task]]] = {}
    for task in suite.tasks:
        used = set(task.upstreams or names) | _probe_upstreams(
            suite.model_copy(update={"tasks": [task]})
        )
        params = {
            name: {
                p: task.params[p]
                for p in _param_names(settings.upstreams[name])
                if p in task.params
            }
            for name in per_task
            if name in used
        }
        key = json.dumps(params, sort_keys=True)
        groups.setdefault(key, (params, []))[1].append(task)
    return list(groups.values())


async def _check_part(
    settings: Settings,
    suite: Suite,
    names: list[str],
    source: str,
    cache: ToolListCache | None,
    params: Mapping[str, Params],
) -> tuple[list[ToolFinding], ToolListings]:
    hidden = {n: settings.upstreams[n].verifier_tools for n in names if n in settings.upstreams}
    cached = {
        n
        for n in names
        if cache is not None
        and n in settings.upstreams
        and cache.fresh(settings.upstreams[n], params.get(n)) is not None
    }
    turns = max((len(t.turns) for t in suite.tasks), default=1)
    listings = await list_upstream_tools(settings, names, cache, params, turns)
    findings = check_tools(suite, listings.names(), source, listings.unreachable, hidden)
    if cache is not None and cached and any(f.level == "error" for f in findings):
        for name in cached:
            cache.forget(settings.upstreams[name], params.get(name))
        listings = await list_upstream_tools(settings, names, cache, params, turns)
        findings = check_tools(suite, listings.names(), source, listings.unreachable, hidden)
    return findings, listings


async def check_suite_tools(
    settings: Settings, suite: Suite, source: str = "", cache: ToolListCache | None = None
) -> tuple[list[ToolFinding], ToolListings]:
    """Findings for every tool the suite names, against the upstreams it uses. With `cache`, an
    unknown tool is checked again against a fresh list before it is reported (the server may
    have gained the tool since it was cached). Per-task upstreams: see the module docstring;
    the listings returned are those of the first parameter set."""
    sandboxes = file_probe_findings(settings, suite, source)
    findings, listings = await _check_suite_tools(settings, suite, source, cache)
    return sandboxes + findings, listings


async def _check_suite_tools(
    settings: Settings, suite: Suite, source: str, cache: ToolListCache | None
) -> tuple[list[ToolFinding], ToolListings]:
    used = sorted({u for t in suite.tasks for u in t.upstreams} | _probe_upstreams(suite))
    names = used or sorted(settings.upstreams)
    per_task = [n for n in names if n in settings.upstreams and _param_names(settings.upstreams[n])]
    if not per_task:
        return await _check_part(settings, suite, names, source, cache, {})
    # one check's own cache: upstreams without params are started once for every set
    cache = cache or ToolListCache(ttl_s=float("inf"))
    sets = _param_sets(suite, settings, per_task, names)
    checked, skipped = sets[:MAX_PARAM_SETS], sets[MAX_PARAM_SETS:]
    parts = await asyncio.gather(
        *(
            _check_part(
                settings,
                suite.model_copy(update={"tasks": tasks}),
                [n for n in names if n not in per_task or n in params],  # what these tasks use
                source,
                cache,
                params,
            )
            for params, tasks in checked
        )
    )
    findings: list[ToolFinding] = []
    where = f"{source}: " if source else ""
    for name in per_task:
        using = [(p[name], tasks[0].id) for p, tasks in checked if name in p]
        shown = "; ".join(f"task {task!r} ({_shown(given)})" for given, task in using)
        findings.append(
            ToolFinding(
                "info",
                f"{where}upstream {name!r} takes task params "
                f"({', '.join(f'{{task.{p}}}' for p in _param_names(settings.upstreams[name]))}):"
                f" its tools were listed once per distinct parameter set, with the params of "
                f"{shown or 'no task'}",
            )
        )
    if skipped:
        tasks = [task for _, group in skipped for task in group]
        rest = suite.model_copy(update={"tasks": tasks})
        shared = [n for n in names if n not in per_task]
        listings = await list_upstream_tools(settings, shared, cache)
        ids = ", ".join(repr(t.id) for t in tasks[:5]) + (", ..." if len(tasks) > 5 else "")
        for name in per_task:
            listings.tools[name] = None
            listings.unreachable[name] = (
                f"a check starts it with at most {MAX_PARAM_SETS} distinct parameter sets; "
                f"not with the params of the {len(tasks)} other task(s): {ids}"
            )
        hidden = {n: settings.upstreams[n].verifier_tools for n in names if n in settings.upstreams}
        findings += check_tools(rest, listings.names(), source, listings.unreachable, hidden)
    for part, _ in parts:
        findings += part
    unique = list({(f.level, f.message): f for f in findings}.values())
    return unique, parts[0][1] if parts else ToolListings()


def _shown(params: Params) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in sorted(params.items())) or "none"


def _probe_upstreams(suite: Suite) -> set[str]:
    found: set[str] = set()
    for task in suite.tasks:
        for outcome in [task.outcome, *(turn.outcome for turn in task.turns)]:
            for probe in outcome.probes if outcome is not None else []:
                upstream = getattr(probe, "upstream", None)
                if isinstance(upstream, str):
                    found.add(upstream)
    return found
