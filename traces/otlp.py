"""OTLP JSON encoding of stored spans (the `trace.otlp.json` download).

Follows the OTLP/JSON mapping: hex trace and span ids, 64-bit integers as decimal strings,
enum values as integers, attributes as `{key, value: AnyValue}` lists.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson

from traces.store import SpanDict

OTLP_JSON_SCHEMA = "otlp-json/1"  # the format of our export; OTLP itself is versioned by proto


def any_value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP AnyValue."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": key_values(value)}}
    if value is None:
        return {}
    return {"stringValue": str(value)}


def key_values(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in attributes.items()]


def _span(span: SpanDict) -> dict[str, Any]:
    status = span.get("status") or {}
    encoded: dict[str, Any] = {
        "traceId": span["trace_id"],
        "spanId": span["span_id"],
        "name": span["name"],
        "kind": span.get("kind") or 0,
        "startTimeUnixNano": str(span.get("start_time_unix_nano") or 0),
        "endTimeUnixNano": str(
            span.get("end_time_unix_nano") or span.get("start_time_unix_nano") or 0
        ),
        "attributes": key_values(span.get("attributes") or {}),
        "events": [
            {
                "timeUnixNano": str(e.get("time_unix_nano") or 0),
                "name": e.get("name", ""),
                "attributes": key_values(e.get("attributes") or {}),
            }
            for e in span.get("events") or []
        ],
        "status": {"code": status.get("code") or 0},
    }
    if span.get("parent_span_id"):
        encoded["parentSpanId"] = span["parent_span_id"]
    if status.get("message"):
        encoded["status"]["message"] = status["message"]
    return encoded


def encode_otlp_json(spans: list[SpanDict]) -> bytes:
    """An `ExportTraceServiceRequest` in OTLP/JSON holding `spans`, grouped by resource/scope."""
    groups: dict[bytes, dict[str, list[SpanDict]]] = defaultdict(lambda: defaultdict(list))
    resources: dict[bytes, dict[str, Any]] = {}
    for span in spans:
        resource = span.get("resource") or {}
        key = orjson.dumps(resource, option=orjson.OPT_SORT_KEYS)
        resources[key] = resource
        groups[key][span.get("scope") or "tracecard"].append(span)
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": key_values(resources[key])},
                "scopeSpans": [
                    {"scope": {"name": scope}, "spans": [_span(s) for s in scope_spans]}
                    for scope, scope_spans in by_scope.items()
                ],
            }
            for key, by_scope in groups.items()
        ]
    }
    return orjson.dumps(document)
