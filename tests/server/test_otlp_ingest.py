"""`POST /v1/traces`: the OTel SDK's exporter against a real server; JSON, protobuf, joins and
faults against tracecard in process (the app as served, no socket)."""

from __future__ import annotations

import gzip
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.in_process import InProcessTracecard, in_process_tracecard
from tests.support.tracecard import running_tracecard
from tracecard.server.settings import Settings
from tracecard.traces.otlp import encode_protobuf

LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessTracecard]:
    tmp: Path = tmp_path_factory.mktemp("otlp")
    settings = Settings(
        db=f"sqlite:///{tmp / 'tracecard.db'}",
        sandbox_root=str(tmp / "sandboxes"),
        max_body_bytes=LIMIT,
        recording={"batch_delay_ms": 50},
    )
    with in_process_tracecard(settings) as tracecard:
        yield tracecard


def new_run(http: httpx.Client) -> dict[str, Any]:
    response = http.post("/api/runs", json={"config": {"name": "otlp-test"}})
    assert response.status_code == 201, response.text
    return dict(response.json())


def run_spans(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/api/runs/{run_id}/spans")
    assert response.status_code == 200, response.text
    return list(response.json()["spans"])


def json_body(trace_id: str, names: list[str], attributes: dict[str, str] | None = None) -> bytes:
    spans = [
        {
            "traceId": trace_id,
            "spanId": secrets.token_hex(8),
            "name": name,
            "kind": 1,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000100000000",
            "attributes": [
                {"key": k, "value": {"stringValue": v}} for k, v in (attributes or {}).items()
            ],
        }
        for name in names
    ]
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def post_json(server: InProcessTracecard, body: bytes, **headers: str) -> httpx.Response:
    return server.client.post(
        "/v1/traces", content=body, headers={"content-type": "application/json", **headers}
    )


def test_exporter_protobuf_spans_join_the_run_by_attribute(settings: Settings) -> None:
    # the SDK's exporter posts over a real socket: a real server
    with running_tracecard(settings) as running, httpx.Client(base_url=running.url) as http:
        run = new_run(http)
        provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{running.url}/v1/traces"))
        )
        tracer = provider.get_tracer("agent")
        attributes = {"tracecard.run.id": run["id"]}
        with tracer.start_as_current_span("invoke_agent", attributes=attributes):
            with tracer.start_as_current_span("chat gpt-x", attributes=attributes):
                pass
        provider.shutdown()
        spans = run_spans(http, run["id"])
    by_name = {s["name"]: s for s in spans}
    assert {"invoke_agent", "chat gpt-x"} <= set(by_name)
    assert by_name["chat gpt-x"]["parent_span_id"] == by_name["invoke_agent"]["span_id"]
    assert by_name["chat gpt-x"]["resource"]["service.name"] == "agent-under-test"
    assert by_name["chat gpt-x"]["run_id"] == run["id"]


def test_json_joins_by_header_baggage_and_trace_id(server: InProcessTracecard) -> None:
    run = new_run(server.client)
    other_trace = secrets.token_hex(16)
    assert post_json(server, json_body(other_trace, ["by-header"]), **{"Tracecard-Run": run["id"]})
    baggage = f"user=x, tracecard.run={run['id']};p=1"
    response = post_json(server, json_body(secrets.token_hex(16), ["by-baggage"]), baggage=baggage)
    assert response.status_code == 200 and response.json() == {}
    assert post_json(server, json_body(run["trace_id"], ["by-run-trace"])).status_code == 200
    # a later span of a trace already joined (no attribute, no header) joins the same run
    assert post_json(server, json_body(other_trace, ["same-trace-later"])).status_code == 200
    names = {s["name"] for s in run_spans(server.client, run["id"])}
    assert {"by-header", "by-baggage", "by-run-trace", "same-trace-later"} <= names


def test_unknown_run_goes_to_an_adhoc_run_per_trace(server: InProcessTracecard) -> None:
    trace_id = secrets.token_hex(16)
    body = json_body(trace_id, ["a", "b"], {"tracecard.run.id": "no-such-run"})
    assert post_json(server, body).status_code == 200
    assert post_json(server, json_body(trace_id, ["c"])).status_code == 200
    store_db = server.settings.db
    from tracecard.traces.store import Store

    store = Store(store_db)
    try:
        adhoc = store.adhoc_run(f"otlp:{trace_id}")
        assert adhoc is not None, "spans of an unknown run must be kept in an ad-hoc run"
        assert {s["name"] for s in store.spans_for_run(adhoc.id)} == {"a", "b", "c"}
    finally:
        store.dispose()


def test_gzip_protobuf_and_partial_success(server: InProcessTracecard) -> None:
    run = new_run(server.client)
    span = {
        "trace_id": run["trace_id"],
        "span_id": secrets.token_hex(8),
        "name": "gz",
        "start_time_unix_nano": 1,
        "attributes": {},
    }
    body = gzip.compress(encode_protobuf([span], {"service.name": "x"}))
    response = server.client.post(
        "/v1/traces",
        content=body,
        headers={"content-type": "application/x-protobuf", "content-encoding": "gzip"},
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "application/x-protobuf"
    )
    doc = orjson.loads(json_body(run["trace_id"], ["fine"]))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append({"traceId": "zz", "spanId": "1"})
    response = post_json(server, orjson.dumps(doc))
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert "traceId" in response.json()["partialSuccess"]["errorMessage"]
    assert {"gz", "fine"} <= {s["name"] for s in run_spans(server.client, run["id"])}


@pytest.mark.parametrize(
    ("content_type", "body", "reason"),
    [
        ("application/x-protobuf", b"\xff\xff\xff\xffgarbage", "not a valid OTLP protobuf"),
        ("application/json", b"{nope", "not valid JSON"),
    ],
)
def test_invalid_body_is_400_with_the_reason(
    server: InProcessTracecard, content_type: str, body: bytes, reason: str
) -> None:
    response = server.client.post(
        "/v1/traces", content=body, headers={"content-type": content_type}
    )
    assert response.status_code == 400
    if content_type == "application/json":
        assert reason in response.json()["message"]
    else:
        from google.rpc.status_pb2 import Status

        assert reason in Status.FromString(response.content).message


def test_bad_gzip_is_400(server: InProcessTracecard) -> None:
    response = post_json(server, b"\x1f\x8bnot really gzip", **{"content-encoding": "gzip"})
    assert response.status_code == 400 and "gzip" in response.json()["message"]


def test_over_the_size_limit_is_413(server: InProcessTracecard) -> None:
    response = post_json(server, b" " * (LIMIT + 1))
    assert response.status_code == 413
    assert str(LIMIT) in response.json()["message"]
    # a small gzip body that inflates past the limit is refused too
    bomb = gzip.compress(b" " * (LIMIT * 4))
    response = post_json(server, bomb, **{"content-encoding": "gzip"})
    assert response.status_code == 413


def test_unsupported_media_type(server: InProcessTracecard) -> None:
    response = server.client.post(
        "/v1/traces", content=b"x", headers={"content-type": "text/plain"}
    )
    assert response.status_code == 415
