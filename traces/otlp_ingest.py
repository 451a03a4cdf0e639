"""The OTLP/HTTP trace codec for ingest: requests to span dicts (encoding is in
`tracecard.traces.otlp`).

Decoding is pure and fast: protobuf through `opentelemetry.proto` (upb), JSON per the OTLP/JSON
mapping (hex ids, 64-bit integers as strings or numbers, enums as integers or names, camelCase or
snake_case keys). A span that cannot be stored (bad ids) is rejected and counted, never dropped
silently; a body that does not parse at all raises `OtlpDecodeError`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracecard.traces.store import SpanDict

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class OtlpDecodeError(ValueError):
    """The body is not an `ExportTraceServiceRequest` in the declared encoding."""


@dataclass
class DecodedBatch:
    """Spans ready for the store, plus what was rejected and why."""

    spans: list[SpanDict] = field(default_factory=list)
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def reject(self, reason: str) -> None:
        self.rejected += 1
        if len(self.reasons) < 5 and reason not in self.reasons:
            self.reasons.append(reason)

    @property
    def error_message(self) -> str:
        return "; ".join(self.reasons)


# --- protobuf ----------------------------------------------------------------------------------
def _pb_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return value.double_value
    if which == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _pb_attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def _pb_attributes(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for kv in key_values:
        value = kv.value
        which = value.WhichOneof("value")  # the common scalar cases inline: this is the hot loop
        if which == "string_value":
            attributes[kv.key] = value.string_value
        elif which == "int_value":
            attributes[kv.key] = value.int_value
        else:
            attributes[kv.key] = _pb_value(value)
    return attributes


def decode_protobuf(body: bytes) -> DecodedBatch:
    """Decode an OTLP/HTTP protobuf `ExportTraceServiceRequest`."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RuntimeError) as exc:
        raise OtlpDecodeError(
            f"body is not a valid OTLP protobuf ExportTraceServiceRequest: {exc}"
        ) from exc
    batch = DecodedBatch()
    for resource_spans in request.resource_spans:
        resource = _pb_attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name or None
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id, span.span_id
                if len(trace_id) != 16 or not any(trace_id):
                    batch.reject(f"span {span.name!r}: trace_id must be 16 non-zero bytes")
                    continue
                if len(span_id) != 8 or not any(span_id):
                    batch.reject(f"span {span.name!r}: span_id must be 8 non-zero bytes")
                    continue
                parent = span.parent_span_id
                batch.spans.append(
                    {
                        "trace_id": trace_id.hex(),
                        "span_id": span_id.hex(),
                        "parent_span_id": parent.hex() if len(parent) == 8 else None,
                        "name": span.name,
                        "kind": span.kind,
                        "start_time_unix_nano": span.start_time_unix_nano,
                        "end_time_unix_nano": span.end_time_unix_nano or None,
                        "status": {
                            "code": span.status.code,
                            "message": span.status.message or None,
                        },
                        "attributes": _pb_attributes(span.attributes),
                        "events": [
                            {
                                "name": event.name,
                                "time_unix_nano": event.time_unix_nano,
                                "attributes": _pb_attributes(event.attributes),
                            }
                            for event in span.events
                        ],
                        "resource": resource,
                        "scope": scope,
                    }
                )
    return batch


# --- JSON --------------------------------------------------------------------------------------
def _get(node: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = node.get(camel)
    return node.get(snake) if value is None else value


def _json_int(value: Any, default: int = 0) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _json_value(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return None
    if "stringValue" in value or "string_value" in value:
        return _get(value, "stringValue", "string_value")
    if "intValue" in value or "int_value" in value:
        return _json_int(_get(value, "intValue", "int_value"))
    if "boolValue" in value or "bool_value" in value:
        return bool(_get(value, "boolValue", "bool_value"))
    if "doubleValue" in value or "double_value" in value:
        return float(_get(value, "doubleValue", "double_value"))
    if "arrayValue" in value or "array_value" in value:
        array = _get(value, "arrayValue", "array_value") or {}
        return [_json_value(v) for v in array.get("values") or []]
    if "kvlistValue" in value or "kvlist_value" in value:
        kvlist = _get(value, "kvlistValue", "kvlist_value") or {}
        return _json_attributes(kvlist.get("values"))
    if "bytesValue" in value or "bytes_value" in value:
        return _get(value, "bytesValue", "bytes_value")
    return None


def _json_attributes(key_values: Any) -> dict[str, Any]:
    if not key_values:
        return {}
    if not isinstance(key_values, list):
        raise ValueError("attributes must be a list of {key, value}")
    return {str(kv["key"]): _json_value(kv.get("value")) for kv in key_values}


def _json_id(value: Any, size: int) -> str | None:
    """A hex id of `size` bytes; OTLP/JSON says hex, but tolerate base64 (protobuf JSON)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.lower()
    if len(text) == size * 2:
        try:
            bytes.fromhex(text)
            return text if text.strip("0") else None
        except ValueError:
            pass
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == size and any(raw) else None


def _json_enum(value: Any, names: Mapping[str, int]) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    return _json_int(value)


def _json_span(span: Mapping[str, Any], resource: dict[str, Any], scope: str | None) -> SpanDict:
    trace_id = _json_id(_get(span, "traceId", "trace_id"), 16)
    span_id = _json_id(_get(span, "spanId", "span_id"), 8)
    name = span.get("name") or ""
    if trace_id is None:
        raise ValueError(f"span {name!r}: traceId must be 32 hex digits, not all zero")
    if span_id is None:
        raise ValueError(f"span {name!r}: spanId must be 16 hex digits, not all zero")
    status = span.get("status") or {}
    end = _json_int(_get(span, "endTimeUnixNano", "end_time_unix_nano"))
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": _json_id(_get(span, "parentSpanId", "parent_span_id"), 8),
        "name": str(name),
        "kind": _json_enum(span.get("kind"), _KIND_NAMES),
        "start_time_unix_nano": _json_int(_get(span, "startTimeUnixNano", "start_time_unix_nano")),
        "end_time_unix_nano": end or None,
        "status": {
            "code": _json_enum(status.get("code"), _STATUS_NAMES),
            "message": status.get("message") or None,
        },
        "attributes": _json_attributes(span.get("attributes")),
        "events": [
            {
                "name": str(event.get("name") or ""),
                "time_unix_nano": _json_int(_get(event, "timeUnixNano", "time_unix_nano")),
                "attributes": _json_attributes(event.get("attributes")),
            }
            for event in span.get("events") or []
        ],
        "resource": resource,
        "scope": scope,
    }


def decode_json(body: bytes) -> DecodedBatch:
    """Decode an OTLP/HTTP JSON `ExportTraceServiceRequest`."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with `resourceSpans`")
    resource_spans = _get(document, "resourceSpans", "resource_spans") or []
    if not isinstance(resource_spans, list):
        raise OtlpDecodeError("`resourceSpans` must be a list")
    batch = DecodedBatch()
    for group in resource_spans:
        try:
            resource = _json_attributes(((group or {}).get("resource") or {}).get("attributes"))
            scope_groups = _get(group, "scopeSpans", "scope_spans") or []
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise OtlpDecodeError(f"malformed resourceSpans entry: {exc}") from exc
        for scope_group in scope_groups:
            if not isinstance(scope_group, dict):
                raise OtlpDecodeError("scopeSpans entries must be objects")
            scope = (scope_group.get("scope") or {}).get("name") or None
            for span in scope_group.get("spans") or []:
                try:
                    batch.spans.append(_json_span(span, resource, scope))
                except (AttributeError, KeyError, TypeError, ValueError) as exc:
                    batch.reject(str(exc) or type(exc).__name__)
    return batch


def decode(body: bytes, content_type: str) -> DecodedBatch:
    """Decode by content type (`application/x-protobuf` or `application/json`)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == JSON:
        return decode_json(body)
    if media in (PROTOBUF, "application/protobuf"):
        return decode_protobuf(body)
    raise OtlpDecodeError(f"unsupported content type {content_type!r}: send {PROTOBUF} or {JSON}")


# --- responses ---------------------------------------------------------------------------------
def encode_response(media: str, rejected: int = 0, error_message: str = "") -> bytes:
    """An `ExportTraceServiceResponse`, with `partial_success` when spans were rejected."""
    if media == JSON:
        if not rejected and not error_message:
            return b"{}"
        partial = {"rejectedSpans": str(rejected), "errorMessage": error_message}
        return orjson.dumps({"partialSuccess": partial})
    response = ExportTraceServiceResponse()
    if rejected or error_message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = error_message
    return bytes(response.SerializeToString())


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_status(media: str, code: int, message: str) -> bytes:
    """A `google.rpc.Status` error body (the OTLP/HTTP failure shape), protobuf or JSON."""
    if media == JSON:
        return orjson.dumps({"code": code, "message": message})
    text = message.encode("utf-8")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


__all__ = [
    "JSON",
    "PROTOBUF",
    "DecodedBatch",
    "OtlpDecodeError",
    "decode",
    "decode_json",
    "decode_protobuf",
    "encode_response",
    "encode_status",
]
