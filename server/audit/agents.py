"""The built-in baseline agents, run as ordinary `tracecard run` agent processes:

    python -m tracecard.server.audit.agents null|oracle|random-tool --tasks TASKS.json [--seed N]

They read the environment contract of docs/agents.md (the run, its task, the proxy URLs of its
upstreams, the answer file), ask tracecard for each turn (`POST /api/runs/{id}/turns/next`),
make their calls through the run's proxy URLs and write their answer where the contract says,
so their traces are recorded and scored like any agent's.

- `null` asks for every turn, makes no call and answers nothing.
- `oracle` makes each turn's expected calls with arguments that satisfy the expectations
  (BFCL's ground truth, `metadata.bfcl_ground_truth`, for imported multi-turn suites) and
  answers an answer that passes the task's answer checks.
- `random-tool` calls, per turn, one random tool the task may use with schema-valid random
  arguments, seeded by `--seed`, the task and the trial.

`TASKS.json` is the suite's tasks as `tracecard run --agent builtin:NAME` writes them
(`builtin.write_tasks`): each agent process validates only its own task.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tracecard.scorers.spec import ExpectedCall
from tracecard.scorers.suite import Task
from tracecard.server.audit.values import answer_for, random_object, random_value, value_for

__all__ = ["KINDS", "main", "oracle_calls", "play"]

KINDS = ("null", "oracle", "random-tool")
log = logging.getLogger(__name__)
Call = dict[str, Any]  # {"tool", "arguments", "upstream"}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _candidates(task: Task) -> list[str]:
    """Strings the task names as what it wants to see: its predicates' and answer checks'."""
    found: list[str] = []
    outcomes = [task.outcome, *(t.outcome for t in task.turns)]
    for outcome in outcomes:
        for predicate in outcome.predicates if outcome else []:
            found += _strings(predicate.value)
    for check in task.completion.checks if task.completion else []:
        found += [s for s in (check.contains, check.exact) if s]
    return found


def _expected(task: Task, turn: int) -> list[ExpectedCall]:
    if task.turns:
        spec = task.turns[turn].invocation if turn < len(task.turns) else None
    else:
        spec = task.invocation if turn == 0 else None
    return list(spec.calls) if spec else []


def oracle_calls(
    task: Task, turn: int, schemas: Mapping[str, Mapping[str, dict[str, Any]]], rng: random.Random
) -> list[Call]:
    """The calls the oracle makes in `turn`: the expected calls, each argument resolved to a
    value its matcher accepts, plus any argument the tool's schema requires that the
    expectation leaves open (unless it is strict about arguments)."""
    default = task.upstreams[0] if task.upstreams else ""
    truth = task.metadata.get("bfcl_ground_truth")
    if isinstance(truth, list):  # BFCL's ground truth, turn by turn (server/bfcl/importer.py)
        calls = truth[turn] if turn < len(truth) else []
        return [
            {"tool": c["tool"], "arguments": c.get("arguments") or {}, "upstream": default}
            for c in (calls if isinstance(calls, list) else [])
            if isinstance(c, dict)
        ]
    candidates = _candidates(task)
    planned: list[Call] = []
    for call in _expected(task, turn):
        upstream = call.upstream or default
        schema = dict(schemas.get(upstream, {}).get(call.tool) or {})
        properties = schema.get("properties") or {}
        arguments: dict[str, Any] = {}
        for name, matcher in call.arguments.items():
            give, value = value_for(matcher, properties.get(name), rng, candidates)
            if give:
                arguments[name] = value
        if not call.strict_arguments:
            for name in schema.get("required") or []:
                if name not in arguments:
                    arguments[name] = random_value(properties.get(name, {}), rng)
        planned.append({"tool": call.tool, "arguments": arguments, "upstream": upstream})
    return planned


def random_calls(
    task: Task, schemas: Mapping[str, Mapping[str, dict[str, Any]]], rng: random.Random
) -> list[Call]:
    """One call of a random tool the task may use, with random schema-valid arguments."""
    choices = [
        (upstream, name)
        for upstream in sorted(schemas)
        for name in sorted(schemas[upstream])
        if task.tools is None or name in task.tools
    ]
    if not choices:
        return []
    upstream, name = rng.choice(choices)
    arguments = random_object(schemas[upstream][name], rng)
    return [{"tool": name, "arguments": arguments, "upstream": upstream}]


class _Sessions:
    """MCP sessions to the run's upstreams, opened on first use (null opens none)."""

    def __init__(self, urls: Mapping[str, str], stack: contextlib.AsyncExitStack) -> None:
        self.urls = urls
        self.stack = stack
        self.clients: dict[str, Any] = {}
        self.schemas: dict[str, dict[str, dict[str, Any]]] = {}

    async def client(self, upstream: str) -> Any:
        if upstream not in self.clients:
            import httpx2
            from mcp.client.client import Client
            from mcp.client.streamable_http import streamable_http_client

            http = await self.stack.enter_async_context(httpx2.AsyncClient(timeout=120))
            client = Client(streamable_http_client(self.urls[upstream], http_client=http))
            self.clients[upstream] = await self.stack.enter_async_context(client)
        return self.clients[upstream]

    async def load_schemas(self, upstreams: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
        for upstream in upstreams:
            if upstream in self.schemas or upstream not in self.urls:
                continue
            listed = await (await self.client(upstream)).list_tools()
            self.schemas[upstream] = {t.name: dict(t.input_schema or {}) for t in listed.tools}
        return self.schemas

    async def call(self, call: Call) -> None:
        if call["upstream"] not in self.urls:
            log.warning("no URL for upstream %r; skipped %s", call["upstream"], call["tool"])
            return
        client = await self.client(call["upstream"])
        try:
            result = await client.call_tool(call["tool"], call["arguments"])
        except Exception as exc:  # noqa: BLE001 - a refused call is evidence, not a crash
            log.info("%s: refused: %s: %s", call["tool"], type(exc).__name__, exc)
            return
        log.debug("%s: %s", call["tool"], "error" if result.is_error else "ok")


def _tool_upstreams(task: Task, urls: Mapping[str, str]) -> list[str]:
    """The task's upstreams reached over MCP (not the model or plain-HTTP ones)."""
    names = task.upstreams or sorted(urls)
    return [n for n in names if n in urls and "/mcp/" in urls[n]]


async def play(kind: str, task: Task, env: Mapping[str, str], seed: int) -> str | None:
    """Play one run of `task` as the `kind` baseline; returns its final answer (or None)."""
    from tracecard.client import TracecardClient

    urls: dict[str, str] = json.loads(env.get("TRACECARD_UPSTREAMS") or "{}")
    run_id = env["TRACECARD_RUN_ID"]
    trial = env.get("TRACECARD_TRIAL", "0")
    rng = random.Random(f"{kind}:{seed}:{task.id}:{trial}")
    upstreams = _tool_upstreams(task, urls)
    async with contextlib.AsyncExitStack() as stack:
        sessions = _Sessions(urls, stack)
        tracecard = stack.enter_context(
            TracecardClient(env["TRACECARD_URL"], token=env.get("TRACECARD_API_TOKEN"))
        )
        while True:
            turn = await asyncio.to_thread(tracecard.next_turn, run_id)
            if turn.get("done"):
                break
            index = int(turn.get("index", 0))
            if kind == "null":
                continue
            schemas = await sessions.load_schemas(upstreams)
            if kind == "oracle":
                calls = oracle_calls(task, index, schemas, rng)
            else:
                calls = random_calls(task, schemas, rng)
            for call in calls:
                await sessions.call(call)
    if kind == "oracle" and task.completion is not None:
        return answer_for(task.completion.checks, rng)
    return None


def load_task(tasks_file: Path, task_id: str) -> Task:
    """One task of the tasks file `builtin.write_tasks` wrote."""
    document = json.loads(tasks_file.read_text(encoding="utf-8"))
    try:
        raw = document["tasks"][task_id]
    except KeyError:
        raise SystemExit(
            f"{tasks_file}: no task {task_id!r} (written for another suite?)"
        ) from None
    return Task.model_validate(raw)


def main(argv: list[str] | None = None) -> int:
    """Entry point: `python -m tracecard.server.audit.agents KIND --tasks FILE [--seed N]`."""
    parser = argparse.ArgumentParser(description="tracecard's built-in baseline agents")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--tasks", required=True, type=Path, help="the suite's tasks (JSON)")
    parser.add_argument("--seed", type=int, default=0, help="random-tool's seed (default 0)")
    args = parser.parse_args(argv)
    env = os.environ
    task = load_task(args.tasks, env["TRACECARD_TASK_ID"])
    answer = asyncio.run(play(args.kind, task, env, args.seed))
    answer_file = env.get("TRACECARD_ANSWER_FILE")
    if answer is not None and answer_file:
        Path(answer_file).write_text(answer, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
