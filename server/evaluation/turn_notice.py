"""Turn notices: an upstream told that a multi-turn run entered turn `i`.

Some tool servers change with the conversation: BFCL's `multi_turn_miss_func` holds a function
back until a later turn. Such an upstream names a verifier-only tool in its configuration
(`turn_tool`, also in `verifier_tools`), and when tracecard hands out turn `i >= 1` of a run
(`POST /api/runs/{id}/turns/next`), after the previous turn's probes and before the turn's
message goes to the agent, it calls that tool once with `{"turn": i}` in the run's process, as
verifier traffic (the agent never sees or calls the tool). The server can then change its tool
list and send `notifications/tools/list_changed`, which reaches the agent's stream before the
agent has the turn's message. Turn 0 needs no notice: a server starts in it.

Why a notice and not a probe: probes observe. The outcome scorer reads what they recorded,
re-probing repeats them and must find the same, and a probe that revealed a function would
reveal it again, or at another time. A notice is an action of the turn handout itself, made
exactly once per turn; nothing reruns it, and it is recorded apart (a `turn notice` span, with no
probe id, so no scorer reads it). Why not the turn in each forwarded request's `_meta`: that
would be a second change to agent payloads, and the server would learn of the turn only at the
agent's next request: too late for an agent that lists its tools from a cache (pydantic-ai's
`MCPToolset`), which asks for nothing until it is told the list changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from tracecard.scorers import Task
from tracecard.server.runtime import Runtime
from tracecard.traces import semconv as sc

__all__ = ["TURN_NOTICE_SPAN", "notice_turn"]

log = logging.getLogger(__name__)

TURN_NOTICE_SPAN = sc.TURN_NOTICE_SPAN  # the viewer labels these spans by it
# (upstream, tool, arguments) -> the CallToolResult as a dict; raises when it cannot be reached
CallTool = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def notice_turn(
    runtime: Runtime, run_id: str, task: Task, index: int, parent: trace.Span, call: CallTool
) -> None:
    """Tell each of the task's upstreams that has a `turn_tool` that turn `index` begins.

    A failure is recorded on the notice's span and logged; the turn is handed out all the same
    (the agent is not held up by a server that could not be told)."""
    if index < 1 or not task.turns:
        return
    for name in task.upstreams:
        upstream = runtime.settings.upstreams.get(name)
        tool = upstream.turn_tool if upstream is not None else None
        if tool is None:
            continue
        span = runtime.tracer.start_span(
            TURN_NOTICE_SPAN,
            context=trace.set_span_in_context(parent),
            kind=trace.SpanKind.INTERNAL,
            attributes={
                sc.ROLE: sc.ROLE_VERIFIER,
                sc.RUN_ID: run_id,
                sc.TURN_INDEX: index,
                sc.UPSTREAM: name,
                sc.GEN_AI_TOOL_NAME: tool,
            },
        )
        try:
            with trace.use_span(span, end_on_exit=False):
                result = await call(name, tool, {"turn": index})
            if result.get("isError"):
                span.set_attribute(sc.ERROR_TYPE, sc.ERR_TOOL)
                span.set_status(Status(StatusCode.ERROR, f"{tool} returned isError"))
        except Exception as exc:  # noqa: BLE001 - recorded; the turn goes out regardless
            log.warning("turn notice %s of run %s to %s failed: %s", index, run_id, name, exc)
            span.set_attribute(sc.ERROR_TYPE, type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
        finally:
            span.end()
