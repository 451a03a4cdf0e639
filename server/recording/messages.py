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


# How a server of the session protocol answers a `server/discover` probe: the client's SDK
# falls back to `initialize`, so it is a version probe, not an error (JSON-RPC method not found,
# the SDKs' generic -32000 "not initialized", or an HTTP 400/404/405 without a JSON-RPC body).
_PROBE_ANSWERS = frozenset({"-32601", "-32000", "400", "404", "405"})


def is_version_probe(method: str, error: str) -> bool:
    """Whether a failed request is a client's version probe that an older server refused."""
    return method == "server/discover" and error in _PROBE_ANSWERS


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
