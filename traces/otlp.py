"""OTLP encoding of stored spans: JSON (the `trace.otlp.json` download) and protobuf.

Follows the OTLP/JSON mapping: hex trace and span ids, 64-bit integers as decimal strings,
enum values as integers, attributes as `{key, value: AnyValue}` lists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracecard.traces.store import SpanDict


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
    if span.get("links"):
        encoded["links"] = [
            {
                "traceId": link["trace_id"],
                "spanId": link["span_id"],
                "attributes": key_values(link.get("attributes") or {}),
            }
            for link in span["links"]
        ]
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


# --- protobuf (the wrap shim ships its spans with this) ----------------------------------------
def _pb_any(value: Any, target: AnyValue) -> None:
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, list | tuple):
        for item in value:
            _pb_any(item, target.array_value.values.add())
    elif isinstance(value, dict):
        for key, item in value.items():
            kv = target.kvlist_value.values.add()
            kv.key = str(key)
            _pb_any(item, kv.value)
    elif value is not None:
        target.string_value = str(value)


def _pb_put_attributes(attributes: Mapping[str, Any], target: Any) -> None:
    for key, value in attributes.items():
        kv = target.add()
        kv.key = key
        _pb_any(value, kv.value)


def encode_protobuf(spans: Iterable[SpanDict], resource: Mapping[str, Any]) -> bytes:
    """An `ExportTraceServiceRequest` (protobuf) holding `spans` under one resource."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    _pb_put_attributes(resource, resource_spans.resource.attributes)
    by_scope: dict[str, Any] = {}
    for span in spans:
        scope_name = span.get("scope") or "tracecard"
        scope_spans = by_scope.get(scope_name)
        if scope_spans is None:
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = scope_name
            by_scope[scope_name] = scope_spans
        encoded: Span = scope_spans.spans.add()
        encoded.trace_id = bytes.fromhex(span["trace_id"])
        encoded.span_id = bytes.fromhex(span["span_id"])
        if span.get("parent_span_id"):
            encoded.parent_span_id = bytes.fromhex(span["parent_span_id"])
        encoded.name = span.get("name") or ""
        encoded.kind = int(span.get("kind") or 0)  # type: ignore[assignment]
        encoded.start_time_unix_nano = int(span.get("start_time_unix_nano") or 0)
        encoded.end_time_unix_nano = int(span.get("end_time_unix_nano") or 0)
        status = span.get("status") or {}
        encoded.status.code = int(status.get("code") or 0)  # type: ignore[assignment]
        if status.get("message"):
            encoded.status.message = str(status["message"])
        _pb_put_attributes(span.get("attributes") or {}, encoded.attributes)
        for event in span.get("events") or []:
            encoded_event = encoded.events.add()
            encoded_event.name = str(event.get("name") or "")
            encoded_event.time_unix_nano = int(event.get("time_unix_nano") or 0)
            _pb_put_attributes(event.get("attributes") or {}, encoded_event.attributes)
        for link in span.get("links") or []:
            encoded_link = encoded.links.add()
            encoded_link.trace_id = bytes.fromhex(link["trace_id"])
            encoded_link.span_id = bytes.fromhex(link["span_id"])
            _pb_put_attributes(link.get("attributes") or {}, encoded_link.attributes)
    return bytes(request.SerializeToString())
