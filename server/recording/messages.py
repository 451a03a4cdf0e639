"""What the recorder reads from a JSON-RPC message before a span exists: its JSON, what it acts
on, whether it is a version probe, the agent's trace context, and whether the server's own
verifier sent it. (Moved from `recorder.py`, which re-exports every name.)"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tracecard.server.runs.registry import RunInfo
from tracecard.traces import semconv

__all__ = [
    "is_verifier",
    "is_version_probe",
    "message_target",
    "parse_json",
    "traceparent_header",
    "traceparent_of",
]

_PROPAGATOR = TraceContextTextMapPropagator()
# The name's target per method: the attribute of `params` that names what is acted on.
_TARGET_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "resources/subscribe": "uri",
    "resources/unsubscribe": "uri",
}


def is_verifier(presented: str | None, verifier_key: str) -> bool:
    """True for the server's own probe traffic: it presents the database's verifier key."""
    if not presented or not verifier_key:
        return False
    return hmac.compare_digest(
        presented.strip().encode("latin-1", "replace"), verifier_key.encode("latin-1")
    )


# A client that speaks both protocol generations probes with `server/discover` and falls back
# to `initialize` on "any other error, or no response within a reasonable timeout" than a
# DiscoverResult or a recognised modern error; "the fallback MUST NOT be keyed to one specific
# error code: legacy servers respond ... (commonly -32601 or -32602) or not at all" (MCP
# 2026-07-28, transports/stdio "Backward Compatibility"); over HTTP, a 4xx whose body "is empty
# or is not a recognized modern JSON-RPC error" falls back too (transports/streamable-http).
# The modern errors are the spec's own codes (schema/2026-07-28/schema.ts): -32022
# UnsupportedProtocolVersion is still negotiation (the client "retries with a mutually supported
# version"), while -32020 HeaderMismatch and -32021 MissingRequiredClientCapability say the
# request itself was wrong: those two are errors. A 5xx or a broken connection is an outage,
# never an era verdict (the `mcp` SDK propagates it), so it stays an error.
_REQUEST_WRONG = frozenset({"-32020", "-32021"})
_NO_ANSWER = frozenset({semconv.ERR_TIMEOUT, semconv.ERR_CLIENT_DISCONNECTED})


def is_version_probe(method: str, error: str) -> bool:
    """Whether a failed request is a client's version probe: `server/discover` refused by an
    older server (any JSON-RPC error but the two that fault the request, any HTTP 4xx) or left
    unanswered, after which the client's SDK falls back to `initialize`."""
    if method != "server/discover":
        return False
    if error in _NO_ANSWER:
        return True
    try:
        code = int(error)
    except ValueError:
        return False  # upstream_unavailable, upstream_protocol_error, blocked...: not the era
    if code < 0:  # a JSON-RPC error code
        return error not in _REQUEST_WRONG
    return 400 <= code < 500  # an HTTP status without a JSON-RPC answer


def parse_json(body: bytes) -> tuple[Any, str | None]:
    """The decoded body, or None and the reason it is not JSON."""
    try:
        return orjson.loads(body), None
    except orjson.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc}"


def message_target(message: Mapping[str, Any]) -> str | None:
    method = message.get("method")
    params = message.get("params")
    key = _TARGET_PARAM.get(method) if isinstance(method, str) else None
    if key and isinstance(params, dict):
        target = params.get(key)
        return str(target) if target is not None else None
    return None


def traceparent_of(
    message: Mapping[str, Any],
    headers: Mapping[str, str],
    run: RunInfo | None = None,
    attributes: dict[str, Any] | None = None,
) -> Context | None:
    """The agent's trace context from `params._meta.traceparent`, else the HTTP header.

    With the (named) `run` it is in, a context of another trace is moved into the run's trace,
    same parent span id (the agent's spans of that trace are moved the same way when they
    arrive over OTLP); the agent's trace id goes into `attributes`.
    """
    context = _agent_context(message, headers)
    if context is None or run is None or run.adhoc or not run.id:
        return context
    span_context = trace.get_current_span(context).get_span_context()
    if format(span_context.trace_id, "032x") == run.trace_id:
        return context
    if attributes is not None:
        attributes[semconv.AGENT_TRACE_ID] = format(span_context.trace_id, "032x")
    moved = SpanContext(
        trace_id=int(run.trace_id, 16),
        span_id=span_context.span_id,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=span_context.trace_state,
    )
    return trace.set_span_in_context(NonRecordingSpan(moved))


def _agent_context(message: Mapping[str, Any], headers: Mapping[str, str]) -> Context | None:
    carrier: dict[str, str] = {}
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
        carrier["traceparent"] = meta["traceparent"]
        if isinstance(meta.get("tracestate"), str):
            carrier["tracestate"] = meta["tracestate"]
    elif "traceparent" in headers:
        carrier["traceparent"] = headers["traceparent"]
        if "tracestate" in headers:
            carrier["tracestate"] = headers["tracestate"]
    if not carrier:
        return None
    context = _PROPAGATOR.extract(carrier)
    span_context = trace.get_current_span(context).get_span_context()
    if not span_context.is_valid:
        return None
    if not span_context.trace_flags.sampled:  # any valid flags: tracecard records every call
        span_context = SpanContext(
            trace_id=span_context.trace_id,
            span_id=span_context.span_id,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            trace_state=span_context.trace_state,
        )
        context = trace.set_span_in_context(NonRecordingSpan(span_context))
    return context


def traceparent_header(span: Span) -> str:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent", "")
