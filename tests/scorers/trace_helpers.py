"""Span builders in exactly the JSON API shape (GET /api/runs/{id}/spans), and task builders."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tracecard.scorers import RunFacts, Task, parse_suite
from tracecard.traces import semconv as sc

_ids = itertools.count(1)
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def span(
    name: str,
    attributes: dict[str, Any],
    *,
    span_id: str | None = None,
    start_ms: int | None = None,
    duration_ms: int = 10,
    status_code: int = sc.STATUS_UNSET,
    parent: str | None = "00000000000000aa",
) -> dict[str, Any]:
    """One stored span as GET /api/runs/{id}/spans returns it."""
    number = next(_ids)
    start = (start_ms if start_ms is not None else number * 100) * 1_000_000
    return {
        "trace_id": TRACE_ID,
        "span_id": span_id or f"{number:016x}",
        "parent_span_id": parent,
        "name": name,
        "kind": sc.KIND_CLIENT,
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + duration_ms * 1_000_000,
        "status": {"code": status_code, "message": ""},
        "attributes": attributes,
        "events": [],
    }


def root(config: str = "cfg", run_id: str = "run-1") -> dict[str, Any]:
    """The run's root span."""
    return span(
        f"invoke_agent {config}",
        {sc.RUN_ID: run_id, sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT},
        parent=None,
        span_id="00000000000000aa",
        start_ms=0,
    )


def tool_call(
    tool: str,
    arguments: dict[str, Any] | str | None = None,
    *,
    upstream: str = "files",
    role: str = sc.ROLE_AGENT,
    result: dict[str, Any] | None = None,
    is_error: bool = False,
    error_type: str | None = None,
    annotations: dict[str, Any] | None = None,
    truncated: bool = False,
    blocked_rule: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A proxied `tools/call` span; a str `arguments` is stored verbatim (e.g. truncated)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    attrs: dict[str, Any] = {
        sc.MCP_METHOD_NAME: "tools/call",
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: tool,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: raw,
        sc.UPSTREAM: upstream,
        sc.ROLE: role,
        sc.TOOL_IS_ERROR: is_error,
    }
    if result is not None or not blocked_rule:
        content = result or {"content": [{"type": "text", "text": "ok"}], "isError": is_error}
        attrs[sc.GEN_AI_TOOL_CALL_RESULT] = json.dumps(content)
    if is_error and error_type is None:
        error_type = sc.ERR_TOOL
    if blocked_rule:
        error_type = sc.ERR_BLOCKED
        attrs[sc.BLOCKED_RULE] = blocked_rule
    if error_type:
        attrs[sc.ERROR_TYPE] = error_type
    if annotations is not None:
        attrs[sc.TOOL_ANNOTATIONS] = json.dumps(annotations)
    if truncated:
        attrs[sc.TRUNCATED] = True
    return span(f"tools/call {tool}", attrs, **kwargs)


def tools_list(tools: list[dict[str, Any]], upstream: str = "files") -> dict[str, Any]:
    """A `tools/list` span whose result announces tools (with annotations)."""
    return span(
        "tools/list",
        {
            sc.MCP_METHOD_NAME: "tools/list",
            sc.UPSTREAM: upstream,
            sc.ROLE: sc.ROLE_AGENT,
            sc.RPC_RESULT: json.dumps({"tools": tools}),
        },
    )


def probe_span(
    probe_id: str, value: Any = None, *, kind: str = "file", error: str | None = None, **kw: Any
) -> dict[str, Any]:
    """A verifier span recorded by the probe runner."""
    attrs: dict[str, Any] = {sc.ROLE: sc.ROLE_VERIFIER, sc.PROBE_ID: probe_id, sc.PROBE_KIND: kind}
    if error is not None:
        attrs[sc.PROBE_ERROR] = error
    else:
        attrs[sc.PROBE_VALUE] = json.dumps(value)
    return span(f"probe {kind} {probe_id}", attrs, **kw)


def make_task(toml_body: str, task_id: str = "t1") -> Task:
    """A task from the TOML that follows its `[[tasks]]` header (id and instruction given)."""
    text = (
        'schema_version = 1\nname = "s"\n\n[[tasks]]\n'
        f'id = "{task_id}"\ninstruction = "do it"\n{toml_body}'
    )
    return parse_suite(text, "toml", "test.toml").tasks[0]


FINISHED = RunFacts(status="finished", final_answer="done", sandbox="/sandbox/run-1")
