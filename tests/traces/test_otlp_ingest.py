"""The OTLP codec: protobuf and JSON decode to span dicts; bad input is named, round trips."""

from __future__ import annotations

import base64

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracecard.traces.otlp import encode_protobuf
from tracecard.traces.otlp_ingest import (
    JSON,
    PROTOBUF,
    OtlpDecodeError,
    decode,
    decode_json,
    decode_protobuf,
    encode_response,
    encode_status,
)

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
PARENT = "00f067aa0ba902b7"


def _span(**overrides: object) -> dict[str, object]:
    span: dict[str, object] = {
        "trace_id": TRACE,
        "span_id": SPAN,
        "parent_span_id": PARENT,
        "name": "chat gpt-test",
        "kind": 3,
        "start_time_unix_nano": 1_700_000_000_000_000_000,
        "end_time_unix_nano": 1_700_000_000_500_000_000,
        "status": {"code": 2, "message": "boom"},
        "attributes": {
            "gen_ai.operation.name": "chat",
            "n": 3,
            "ok": True,
            "ratio": 0.5,
            "tags": ["a", "b"],
            "nested": {"k": "v"},
        },
        "events": [{"name": "e", "time_unix_nano": 5, "attributes": {"x": 1}}],
        "scope": "agent",
    }
    span.update(overrides)
    return span


def test_protobuf_round_trip_keeps_every_field() -> None:
    body = encode_protobuf([_span()], {"service.name": "agent"})
    batch = decode_protobuf(body)
    assert batch.rejected == 0
    (span,) = batch.spans
    expected = _span()
    for key in ("trace_id", "span_id", "parent_span_id", "name", "kind", "attributes", "events"):
        assert span[key] == expected[key], key
    assert span["status"] == {"code": 2, "message": "boom"}
    assert span["resource"] == {"service.name": "agent"}
    assert span["scope"] == "agent"
    assert span["start_time_unix_nano"] == 1_700_000_000_000_000_000


def test_protobuf_rejects_bad_ids_and_counts_them() -> None:
    request = ExportTraceServiceRequest.FromString(encode_protobuf([_span()], {}))
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    bad.trace_id = b"\x01\x02"
    zero = request.resource_spans[0].scope_spans[0].spans.add()
    zero.CopyFrom(bad)
    zero.trace_id = bytes(16)
    batch = decode_protobuf(request.SerializeToString())
    assert len(batch.spans) == 1
    assert batch.rejected == 2
    assert "trace_id must be 16 non-zero bytes" in batch.error_message


def test_protobuf_garbage_is_an_error_with_the_reason() -> None:
    with pytest.raises(OtlpDecodeError, match="not a valid OTLP protobuf"):
        decode_protobuf(b"\xff\xff\xff\xff not protobuf")


def _json_doc(span: dict[str, object]) -> bytes:
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                    },
                    "scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}],
                }
            ]
        }
    )


def test_json_mapping_hex_ids_string_ints_enum_names() -> None:
    body = _json_doc(
        {
            "traceId": TRACE,
            "spanId": SPAN,
            "parentSpanId": "",
            "name": "llm",
            "kind": "SPAN_KIND_CLIENT",
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": 1700000000000000001,
            "status": {"code": "STATUS_CODE_OK"},
            "attributes": [
                {"key": "i", "value": {"intValue": "42"}},
                {"key": "d", "value": {"doubleValue": 1.5}},
                {"key": "b", "value": {"boolValue": True}},
                {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "x"}]}}},
                {
                    "key": "kv",
                    "value": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": 1}}]}},
                },
            ],
            "events": [{"name": "ev", "timeUnixNano": "7", "attributes": []}],
        }
    )
    batch = decode(body, "application/json; charset=utf-8")
    (span,) = batch.spans
    assert span["trace_id"] == TRACE and span["span_id"] == SPAN
    assert span["parent_span_id"] is None
    assert span["kind"] == 3
    assert span["status"] == {"code": 1, "message": None}
    assert span["attributes"] == {"i": 42, "d": 1.5, "b": True, "arr": ["x"], "kv": {"k": 1}}
    assert span["events"] == [{"name": "ev", "time_unix_nano": 7, "attributes": {}}]
    assert span["resource"] == {"service.name": "a"}
    assert span["scope"] == "s"


def test_json_accepts_base64_ids_and_snake_case() -> None:
    body = orjson.dumps(
        {
            "resource_spans": [
                {
                    "scope_spans": [
                        {
                            "spans": [
                                {
                                    "trace_id": base64.b64encode(bytes.fromhex(TRACE)).decode(),
                                    "span_id": base64.b64encode(bytes.fromhex(SPAN)).decode(),
                                    "name": "x",
                                    "start_time_unix_nano": 1,
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    )
    (span,) = decode_json(body).spans
    assert (span["trace_id"], span["span_id"]) == (TRACE, SPAN)


def test_json_bad_span_is_rejected_not_the_request() -> None:
    good = {"traceId": TRACE, "spanId": SPAN, "name": "ok"}
    doc = orjson.loads(_json_doc(good))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append(
        {"traceId": "nothex", "spanId": SPAN, "name": "bad"}
    )
    batch = decode_json(orjson.dumps(doc))
    assert len(batch.spans) == 1 and batch.rejected == 1
    assert "spans[1] ('bad'): `traceId` must be 32 hex digits" in batch.error_message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"resourceSpans": 3}', "must be a list"),
    ],
)
def test_json_errors_name_the_reason(body: bytes, message: str) -> None:
    with pytest.raises(OtlpDecodeError, match=message):
        decode_json(body)


def test_unsupported_content_type() -> None:
    with pytest.raises(OtlpDecodeError, match="unsupported content type"):
        decode(b"", "text/plain")


def test_responses_report_partial_success() -> None:
    assert encode_response(JSON) == b"{}"
    assert orjson.loads(encode_response(JSON, 2, "bad ids")) == {
        "partialSuccess": {"rejectedSpans": "2", "errorMessage": "bad ids"}
    }
    response = ExportTraceServiceResponse.FromString(encode_response(PROTOBUF, 2, "bad ids"))
    assert response.partial_success.rejected_spans == 2
    assert response.partial_success.error_message == "bad ids"
    assert not ExportTraceServiceResponse.FromString(encode_response(PROTOBUF)).HasField(
        "partial_success"
    )


def test_status_body_is_a_google_rpc_status() -> None:
    from google.rpc.status_pb2 import Status

    status = Status.FromString(encode_status(PROTOBUF, 3, "bad body é"))
    assert (status.code, status.message) == (3, "bad body é")
    assert orjson.loads(encode_status(JSON, 3, "x")) == {"code": 3, "message": "x"}
