"""The OTLP/HTTP trace codec for ingest: requests to span dicts (encoding is in
`tracecard.traces.otlp`).

Decoding is pure and fast: protobuf through `opentelemetry.proto` (upb), JSON per the OTLP/JSON
mapping (hex ids, 64-bit integers as strings or numbers, enums as integers or names, camelCase or
snake_case keys). A span that cannot be stored (bad ids) is rejected and counted, never dropped
silently; a body that does not parse at all raises `OtlpDecodeError`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import orjson
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracecard.traces.otlp_batch import DecodedBatch, OtlpDecodeError, OtlpTooManySpans
from tracecard.traces.otlp_json_in import decode_json

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_NO_TRACE = bytes(16)  # all-zero ids are invalid (OTLP)
_NO_SPAN = bytes(8)


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
    for kv in key_values:  # the hot loop: the common cases first, each with as few reads as can be
        value = kv.value
        text = value.string_value  # most values are non-empty strings: one read, no oneof
        if text:
            attributes[kv.key] = text
            continue
        number = value.int_value  # a non-zero int is the oneof's int: one read more
        if number:
            attributes[kv.key] = number
            continue
        which = value.WhichOneof("value")
        if which == "string_value":
            attributes[kv.key] = ""
        elif which == "int_value":
            attributes[kv.key] = 0
        elif which == "array_value":  # e.g. finish reasons: its strings read like the above
            attributes[kv.key] = [
                item.string_value or _pb_value(item) for item in value.array_value.values
            ]
        else:
            attributes[kv.key] = _pb_value(value)
    return attributes


def decode_protobuf(body: bytes, max_spans: int | None = None) -> DecodedBatch:
    """Decode an OTLP/HTTP protobuf `ExportTraceServiceRequest` (at most `max_spans` spans)."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RuntimeError) as exc:
        raise OtlpDecodeError(
            f"body is not a valid OTLP protobuf ExportTraceServiceRequest: {exc}"
        ) from exc
    if max_spans is not None:
        total = sum(len(group.spans) for rs in request.resource_spans for group in rs.scope_spans)
        if total > max_spans:
            raise OtlpTooManySpans(total, max_spans)
    batch = DecodedBatch()
    for resource_spans in request.resource_spans:
        resource = _pb_attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name or None
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id, span.span_id
                if len(trace_id) != 16 or trace_id == _NO_TRACE:
                    batch.reject(f"span {span.name!r}: trace_id must be 16 non-zero bytes")
                    continue
                if len(span_id) != 8 or span_id == _NO_SPAN:
                    batch.reject(f"span {span.name!r}: span_id must be 8 non-zero bytes")
                    continue
                parent = span.parent_span_id
                status = span.status
                events = span.events
                batch.spans.append(
                    {
                        "trace_id": trace_id.hex(),
                        "span_id": span_id.hex(),
                        "parent_span_id": parent.hex() if len(parent) == 8 else None,
                        "name": span.name,
                        "kind": span.kind,
                        "start_time_unix_nano": span.start_time_unix_nano,
                        "end_time_unix_nano": span.end_time_unix_nano or None,
                        "status": {"code": status.code, "message": status.message or None},
                        "attributes": _pb_attributes(span.attributes),
                        "events": [
                            {
                                "name": event.name,
                                "time_unix_nano": event.time_unix_nano,
                                "attributes": _pb_attributes(event.attributes),
                            }
                            for event in events
                        ]
                        if events
                        else [],
                        "resource": resource,
                        "scope": scope,
                    }
                )
    return batch


def decode(body: bytes, content_type: str, max_spans: int | None = None) -> DecodedBatch:
    """Decode by content type (`application/x-protobuf` or `application/json`); more than
    `max_spans` spans raise `OtlpTooManySpans` before any span is built."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == JSON:
        return decode_json(body, max_spans)
    if media in (PROTOBUF, "application/protobuf"):
        return decode_protobuf(body, max_spans)
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
    "OtlpTooManySpans",
    "decode",
    "decode_json",
    "decode_protobuf",
    "encode_response",
    "encode_status",
]
