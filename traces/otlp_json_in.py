"""OTLP/JSON decoding for ingest, per the OTLP/JSON mapping: hex ids (base64 tolerated), 64-bit
integers as strings or numbers, enums as integers or names, camelCase or snake_case keys.

Every error names the field by its path (`resourceSpans[0].scopeSpans[1].spans[2]`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import orjson

from tracecard.traces.otlp_batch import (
    KIND_NAMES,
    STATUS_NAMES,
    DecodedBatch,
    OtlpDecodeError,
    OtlpTooManySpans,
)
from tracecard.traces.store import SpanDict

U64 = 1 << 64
_I32 = 1 << 31


def _get(node: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = node.get(camel)
    return node.get(snake) if value is None else value


def _kind_of(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _json_list(node: Mapping[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    """The list at `node[camel]` (or `node[snake]`); missing is empty, anything else an error."""
    value = _get(node, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"`{where}.{camel}` must be a list, not {_kind_of(value)}")
    return value


def _json_object(value: Any, where: str) -> Mapping[str, Any]:
    """`value` when it is an object (missing is empty), else an error naming `where`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OtlpDecodeError(f"`{where}` must be an object, not {_kind_of(value)}")
    return value


def _json_int(value: Any, default: int = 0) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _json_u64(span: Mapping[str, Any], camel: str, snake: str) -> int:
    """An unsigned 64-bit field (times in nanoseconds), named in the error when it is not."""
    value = _get(span, camel, snake)
    try:
        number = _json_int(value)
    except ValueError:
        number = -1
    if not 0 <= number < U64:
        raise ValueError(f"`{camel}` must be an unsigned 64-bit integer, got {value!r}")
    return number


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
        array = _json_object(_get(value, "arrayValue", "array_value"), "arrayValue")
        return [_json_value(v) for v in _json_list(array, "values", "values", "arrayValue")]
    if "kvlistValue" in value or "kvlist_value" in value:
        kvlist = _json_object(_get(value, "kvlistValue", "kvlist_value"), "kvlistValue")
        return _json_attributes(kvlist.get("values"))
    if "bytesValue" in value or "bytes_value" in value:
        return _get(value, "bytesValue", "bytes_value")
    return None


def _json_attributes(key_values: Any, where: str = "attributes") -> dict[str, Any]:
    if not key_values:
        return {}
    if not isinstance(key_values, list):
        raise ValueError(f"`{where}` must be a list of {{key, value}}, not {_kind_of(key_values)}")
    attributes: dict[str, Any] = {}
    for index, kv in enumerate(key_values):
        if not isinstance(kv, dict) or "key" not in kv:
            raise ValueError(f"`{where}[{index}]` must be an object with a `key`")
        try:
            attributes[str(kv["key"])] = _json_value(kv.get("value"))
        except (OtlpDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"`{where}[{index}]` ({kv['key']!r}): {exc}") from exc
    return attributes


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


def _json_enum(value: Any, names: Mapping[str, int], field: str) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    try:
        number = _json_int(value)
    except ValueError:
        number = _I32
    if not -_I32 <= number < _I32:
        raise ValueError(f"`{field}` must be one of {sorted(names)} or its number, got {value!r}")
    return number


def _json_events(span: Mapping[str, Any]) -> list[dict[str, Any]]:
    events = span.get("events") or []
    if not isinstance(events, list):
        raise ValueError(f"`events` must be a list, not {_kind_of(events)}")
    decoded = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise ValueError(f"`events[{index}]` must be an object, not {_kind_of(event)}")
        decoded.append(
            {
                "name": str(event.get("name") or ""),
                "time_unix_nano": _json_u64(event, "timeUnixNano", "time_unix_nano"),
                "attributes": _json_attributes(
                    event.get("attributes"), f"events[{index}].attributes"
                ),
            }
        )
    return decoded


def _json_span(span: Any, resource: dict[str, Any], scope: str | None) -> SpanDict:
    if not isinstance(span, dict):
        raise ValueError(f"a span must be an object, not {_kind_of(span)}")
    trace_id = _json_id(_get(span, "traceId", "trace_id"), 16)
    span_id = _json_id(_get(span, "spanId", "span_id"), 8)
    name = span.get("name") or ""
    if trace_id is None:
        raise ValueError("`traceId` must be 32 hex digits, not all zero")
    if span_id is None:
        raise ValueError("`spanId` must be 16 hex digits, not all zero")
    status = span.get("status") or {}
    if not isinstance(status, dict):
        raise ValueError(f"`status` must be an object, not {_kind_of(status)}")
    message = status.get("message")
    end = _json_u64(span, "endTimeUnixNano", "end_time_unix_nano")
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": _json_id(_get(span, "parentSpanId", "parent_span_id"), 8),
        "name": str(name),
        "kind": _json_enum(span.get("kind"), KIND_NAMES, "kind"),
        "start_time_unix_nano": _json_u64(span, "startTimeUnixNano", "start_time_unix_nano"),
        "end_time_unix_nano": end or None,
        "status": {
            "code": _json_enum(status.get("code"), STATUS_NAMES, "status.code"),
            "message": str(message) if message else None,
        },
        "attributes": _json_attributes(span.get("attributes")),
        "events": _json_events(span),
        "resource": resource,
        "scope": scope,
    }


def decode_json(body: bytes, max_spans: int | None = None) -> DecodedBatch:
    """Decode an OTLP/HTTP JSON `ExportTraceServiceRequest`. A malformed container (a list that
    is not one, an object that is not one) fails the request with the field's path; a malformed
    span is rejected with its path and the reason, and the others are kept."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with `resourceSpans`")
    groups = _json_list(document, "resourceSpans", "resource_spans", "(body)")
    # the containers first: a request with too many spans is refused before any is built
    plan: list[tuple[dict[str, Any], str | None, list[Any], str]] = []
    total = 0
    for g, group in enumerate(groups):
        where = f"resourceSpans[{g}]"
        group = _json_object(group, where)
        resource_node = _json_object(group.get("resource"), f"{where}.resource")
        try:
            resource = _json_attributes(resource_node.get("attributes"))
        except ValueError as exc:
            raise OtlpDecodeError(f"`{where}.resource`: {exc}") from exc
        for s, scope_group in enumerate(_json_list(group, "scopeSpans", "scope_spans", where)):
            at = f"{where}.scopeSpans[{s}]"
            scope_group = _json_object(scope_group, at)
            scope = _json_object(scope_group.get("scope"), f"{at}.scope").get("name") or None
            spans = _json_list(scope_group, "spans", "spans", at)
            total += len(spans)
            plan.append((resource, str(scope) if scope is not None else None, spans, at))
    if max_spans is not None and total > max_spans:
        raise OtlpTooManySpans(total, max_spans)
    batch = DecodedBatch()
    for resource, scope, spans, at in plan:
        for index, span in enumerate(spans):
            try:
                batch.spans.append(_json_span(span, resource, scope))
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                name = span.get("name") if isinstance(span, dict) else None
                named = f" ({name!r})" if name else ""
                batch.reject(f"{at}.spans[{index}]{named}: {exc or type(exc).__name__}")
    return batch
