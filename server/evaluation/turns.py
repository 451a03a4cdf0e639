"""tracecard plays the user of a multi-turn task: `POST /api/runs/{id}/turns/next` closes the
open turn (its probes run at the boundary, as verifier spans under the turn's span) and hands out
the next user message, opening its span; the run's proxied calls are parented on that span.

Turn state lives in this process's memory (like the proxy's run cache): a run's turns are asked
of the server that created it. A task with only an `instruction` has one turn: that instruction.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from opentelemetry import trace

from tracecard.scorers import Task
from tracecard.scorers.types import FINAL_STATUSES
from tracecard.server.evaluation.hooks import call_tool_through_proxy, probe_context, tasks_of
from tracecard.server.evaluation.probes import run_outcome_probes
from tracecard.server.evaluation.service import task_of
from tracecard.server.evaluation.turn_notice import CallTool, notice_turn
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runs.service import RunError, get_run
from tracecard.server.runtime import Runtime
from tracecard.server.stdio.verifier import call_tool as verifier_call
from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow

__all__ = ["TurnBoard", "close_turns", "next_turn"]


@dataclass
class _RunTurns:
    next_index: int = 0
    open_index: int | None = None
    span: trace.Span | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TurnBoard:
    """The turn each multi-turn run is in, by run id."""

    def __init__(self) -> None:
        self._by_run: dict[str, _RunTurns] = {}

    def of(self, run_id: str) -> _RunTurns:
        return self._by_run.setdefault(run_id, _RunTurns())

    def pop(self, run_id: str) -> _RunTurns | None:
        return self._by_run.pop(run_id, None)


def board_of(runtime: Runtime) -> TurnBoard:
    if runtime.turns is None:
        runtime.turns = TurnBoard()
    return runtime.turns


def _messages(task: Task) -> list[str]:
    return [turn.user for turn in task.turns] if task.turns else [task.instruction]


async def _close(runtime: Runtime, run: RunRow, task: Task, state: _RunTurns) -> None:
    # The boundary: the turn's probes run before anything else is handed out.
    if state.span is None or state.open_index is None:
        return
    index, span = state.open_index, state.span
    outcome = task.turns[index].outcome if task.turns else None
    if outcome is not None:
        parent = trace.set_span_in_context(span)
        await run_outcome_probes(outcome, probe_context(runtime, run, parent, turn=index))
    span.end()
    state.span, state.open_index = None, None


async def _task(runtime: Runtime, run: RunRow) -> Task:
    task = tasks_of(runtime).get(run.id) or await anyio.to_thread.run_sync(
        task_of, runtime.store, run
    )
    if task is None:
        raise RunError(f"run {run.id} is not a trial of a task: it has no turns to hand out", 409)
    return task


async def next_turn(runtime: Runtime, run_id: str) -> dict[str, Any]:
    """Close the open turn (probes), then the next user message, or `done` after the last."""
    run = await get_run(runtime, run_id)
    if run.status in FINAL_STATUSES:
        raise RunError(f"run {run_id} already ended with status {run.status!r}", 409)
    task = await _task(runtime, run)
    info = await runtime.runs.resolve(run_id)
    assert info is not None  # get_run found it
    state = board_of(runtime).of(run_id)
    messages = _messages(task)
    async with state.lock:
        await _close(runtime, run, task, state)
        if state.next_index >= len(messages):
            info.enter_turn(None)
            return {"run_id": run_id, "done": True, "index": None, "count": len(messages)}
        index = state.next_index
        state.span = _open(runtime, info, index, messages[index])
        state.open_index, state.next_index = index, index + 1
        info.enter_turn(trace.set_span_in_context(state.span))
        await notice_turn(runtime, run_id, task, index, state.span, _caller(runtime, info))
    if run.status == "pending":
        await anyio.to_thread.run_sync(lambda: runtime.store.update_run(run_id, status="running"))
    return {
        "run_id": run_id,
        "done": False,
        "index": index,
        "count": len(messages),
        "user": messages[index],
        "instruction": task.instruction if task.turns else None,
    }


def _caller(runtime: Runtime, info: RunInfo) -> CallTool:
    """How a turn notice reaches an upstream: a stdio one in process, others through the
    proxy as a probe's call does."""

    async def call(upstream: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        settings = runtime.settings.upstreams.get(upstream)
        if runtime.stdio is not None and settings is not None and settings.command is not None:
            return await verifier_call(runtime.stdio, upstream, info, tool, arguments)
        return await call_tool_through_proxy(runtime, info.id, upstream, tool, arguments)

    return call


def _open(runtime: Runtime, info: RunInfo, index: int, message: str) -> trace.Span:
    return runtime.tracer.start_span(
        f"turn {index}",
        context=info.root_context,
        kind=trace.SpanKind.INTERNAL,
        attributes={sc.RUN_ID: info.id, sc.TURN_INDEX: index, sc.TURN_USER: message},
    )


async def close_turns(runtime: Runtime, run: RunRow) -> dict[str, Any] | None:
    """Finish hook (before probes and scoring): the open turn's boundary is the run's end."""
    state = board_of(runtime).pop(run.id)
    if state is None:
        return None
    async with state.lock:
        if state.span is not None:
            await _close(runtime, run, await _task(runtime, run), state)
    info = runtime.runs.cached(run.id)
    if info is not None:
        info.enter_turn(None)
    return None
