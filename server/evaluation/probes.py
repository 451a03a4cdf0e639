"""Run a task's outcome probes after a run and record each as a `verifier` span.

Probes are the only I/O of scoring: the outcome scorer reads what they recorded, so rescoring
never touches the tools again. Kept free of Litestar so the runner can be used anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace

from tracecard.scorers.spec import FileProbe, HttpProbe, OutcomeSpec, ToolProbe
from tracecard.scorers.suite import Task
from tracecard.server.recording.redaction import Redactor
from tracecard.traces import semconv as sc

__all__ = [
    "ProbeContext",
    "ProbeError",
    "ProbeOutcome",
    "RedactorFor",
    "run_outcome_probes",
    "run_probes",
]

CallTool = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
# upstream (None for HTTP and file probes) -> the redactor whose rules apply to what is stored
RedactorFor = Callable[[str | None], Redactor | None]


def _none(_upstream: str | None) -> Redactor | None:
    return None


MAX_FILE_BYTES = 1_000_000


class ProbeError(Exception):
    """A probe that could not observe anything; the message is recorded on its span."""


@dataclass
class ProbeContext:
    """Everything a probe may touch: the upstream tools, HTTP, the sandbox, the tracer."""

    call_tool: CallTool  # (upstream, tool, arguments) -> CallToolResult dict; raises on failure
    http: httpx.AsyncClient
    sandbox: Path | None
    tracer: trace.Tracer
    run_id: str
    parent: otel_context.Context | None
    timeout_s: float
    max_file_bytes: int = MAX_FILE_BYTES
    turn: int | None = None  # the turn whose boundary these probes check (None: the run's end)
    redactor_for: RedactorFor = _none  # the recorder's rules: observations are stored redacted

    def redact(self, upstream: str | None, value: Any) -> Any:
        redactor = self.redactor_for(upstream)
        return value if redactor is None else redactor.value(value)

    def redact_url(self, url: str) -> str:
        redactor = self.redactor_for(None)
        base, mark, query = url.partition("?")
        return url if redactor is None or not mark else f"{base}?{redactor.query(query)}"


@dataclass(frozen=True)
class ProbeOutcome:
    """What one probe observed (`value`), or why it could not (`error`), and its span id."""

    probe_id: str
    kind: str
    value: Any
    error: str | None
    span_id: str


def _json_text(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def _decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", errors="replace")


def _read_file(sandbox: Path, relative: str, limit: int) -> Any:
    root = sandbox.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise ProbeError(f"path {relative!r} escapes the sandbox")
    if not target.exists():
        return None  # observed absence: `absent` predicates test for it
    if not target.is_file():
        raise ProbeError(f"path {relative!r} is not a regular file")
    with target.open("rb") as handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise ProbeError(f"file {relative!r} is larger than {limit} bytes")
    return _decode(raw)


async def _observe_tool(probe: ToolProbe, ctx: ProbeContext, span: trace.Span) -> Any:
    arguments = ctx.redact(probe.upstream, probe.arguments)
    span.set_attribute(sc.GEN_AI_TOOL_CALL_ARGUMENTS, _json_text(arguments))
    result = await ctx.call_tool(probe.upstream, probe.tool, dict(probe.arguments))
    span.set_attribute(sc.GEN_AI_TOOL_CALL_RESULT, _json_text(ctx.redact(probe.upstream, result)))
    is_error = bool(result.get("isError"))
    span.set_attribute(sc.TOOL_IS_ERROR, is_error)
    if is_error:  # an unknown tool, a refused argument: nothing was observed
        span.set_attribute(sc.ERROR_TYPE, sc.ERR_TOOL)
        raise ProbeError(f"tool {probe.tool!r} on {probe.upstream!r} failed: {_error_text(result)}")
    return result


def _error_text(result: dict[str, Any]) -> str:
    texts = [
        str(c.get("text"))
        for c in result.get("content") or []
        if isinstance(c, dict) and c.get("type") == "text"
    ]
    return " ".join(texts)[:500] or "isError without a message"


async def _observe_http(probe: HttpProbe, ctx: ProbeContext, span: trace.Span) -> Any:
    span.set_attribute(sc.URL_FULL, ctx.redact_url(probe.url))
    try:
        response = await ctx.http.request(
            probe.method,
            probe.url,
            headers=probe.headers,
            json=probe.json_body if probe.json_body is not None else None,
        )
    except httpx.HTTPError as exc:
        raise ProbeError(f"HTTP request failed: {type(exc).__name__}: {exc}") from exc
    span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, response.status_code)
    if response.status_code >= 500:
        raise ProbeError(f"HTTP {response.status_code} from {probe.method} {probe.url}")
    return {"status": response.status_code, "body": _decode(response.content)}


async def _observe_file(probe: FileProbe, ctx: ProbeContext) -> Any:
    if ctx.sandbox is None:
        raise ProbeError("the run has no sandbox to read files from")
    return await asyncio.to_thread(_read_file, ctx.sandbox, probe.path, ctx.max_file_bytes)


def _span_name(probe: ToolProbe | HttpProbe | FileProbe) -> str:
    if isinstance(probe, ToolProbe):
        return f"tools/call {probe.tool}"
    if isinstance(probe, HttpProbe):
        return f"probe http {probe.method}"
    return f"probe file {probe.path}"


def _attributes(probe: ToolProbe | HttpProbe | FileProbe, ctx: ProbeContext) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        sc.ROLE: sc.ROLE_VERIFIER,
        sc.RUN_ID: ctx.run_id,
        sc.PROBE_ID: probe.id,
        sc.PROBE_KIND: probe.kind,
    }
    if ctx.turn is not None:
        attrs[sc.TURN_INDEX] = ctx.turn
    if isinstance(probe, ToolProbe):
        attrs |= {
            sc.MCP_METHOD_NAME: "tools/call",
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: probe.tool,
            sc.UPSTREAM: probe.upstream,
        }
    elif isinstance(probe, HttpProbe):
        attrs[sc.HTTP_REQUEST_METHOD] = probe.method
    return attrs


async def _run_one(probe: ToolProbe | HttpProbe | FileProbe, ctx: ProbeContext) -> ProbeOutcome:
    span = ctx.tracer.start_span(
        _span_name(probe),
        context=ctx.parent,
        kind=trace.SpanKind.CLIENT,
        attributes=_attributes(probe, ctx),
    )
    value: Any = None
    error: str | None = None
    try:
        async with asyncio.timeout(ctx.timeout_s):
            if isinstance(probe, ToolProbe):
                value = await _observe_tool(probe, ctx, span)
            elif isinstance(probe, HttpProbe):
                value = await _observe_http(probe, ctx, span)
            else:
                value = await _observe_file(probe, ctx)
    except TimeoutError:
        error = f"probe timed out after {ctx.timeout_s}s"
        span.set_attribute(sc.ERROR_TYPE, sc.ERR_TIMEOUT)
    except ProbeError as exc:
        error = str(exc)
        if sc.ERROR_TYPE not in getattr(span, "attributes", {}):
            span.set_attribute(sc.ERROR_TYPE, type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - any failure of the tool means "not evaluated"
        error = f"{type(exc).__name__}: {exc}"
        span.set_attribute(sc.ERROR_TYPE, type(exc).__name__)
    if error is None:
        upstream = probe.upstream if isinstance(probe, ToolProbe) else None
        value = ctx.redact(upstream, value)  # the outcome scorer reads the stored value
        span.set_attribute(sc.PROBE_VALUE, _json_text(value))
    else:
        value = None
        span.set_attribute(sc.PROBE_ERROR, error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
    span.end()
    span_id = format(span.get_span_context().span_id, "016x")
    return ProbeOutcome(probe.id, probe.kind, value, error, span_id)


async def run_probes(task: Task, ctx: ProbeContext) -> list[ProbeOutcome]:
    """Run every outcome probe of `task` in order; each is recorded as a verifier span."""
    return await run_outcome_probes(task.outcome, ctx)


async def run_outcome_probes(outcome: OutcomeSpec | None, ctx: ProbeContext) -> list[ProbeOutcome]:
    """Run the probes of one outcome spec (the task's, or one turn's with `ctx.turn` set)."""
    if outcome is None:
        return []
    return [await _run_one(probe, ctx) for probe in outcome.probes]
