"""Hostile OTLP input against tracecard (in process: the app as served, no socket) on real SQLite
and real PostgreSQL: schema errors are 400 naming the field, NUL and u64 times are stored, the
span cap is a 413 that says so."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.in_process import InProcessTracecard, in_process_tracecard
from tracecard.server.settings import Settings

MAX_SPANS = 50


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[InProcessTracecard]:
    settings = Settings(
        db=db_url,
        sandbox_root=str(tmp_path / "sandboxes"),
        otlp_max_spans=MAX_SPANS,
        recording={"batch_delay_ms": 50},
    )
    with in_process_tracecard(settings) as tracecard:
        yield tracecard


def _post(server: InProcessTracecard, document: Any, **headers: str) -> httpx.Response:
    body = document if isinstance(document, bytes) else orjson.dumps(document)
    return server.client.post(
        "/v1/traces", content=body, headers={"content-type": "application/json", **headers}
    )


def _span(name: str = "chat", **fields: Any) -> dict[str, Any]:
    return {
        "traceId": secrets.token_hex(16),
        "spanId": secrets.token_hex(8),
        "name": name,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        **fields,
    }


def _document(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def _new_run(server: InProcessTracecard, config_name: str = "hostile") -> dict[str, Any]:
    response = server.client.post("/api/runs", json={"config": {"name": config_name}})
    assert response.status_code == 201, response.text
    return dict(response.json())


def _spans(server: InProcessTracecard, run_id: str) -> dict[str, dict[str, Any]]:
    response = server.client.get(f"/api/runs/{run_id}/spans")
    assert response.status_code == 200, response.text
    return {s["name"]: s for s in response.json()["spans"]}


MALFORMED = [
    ({"resourceSpans": [{"scopeSpans": 5}]}, "`resourceSpans[0].scopeSpans` must be a list"),
    (
        {"resourceSpans": [{"scopeSpans": [{"spans": 7}]}]},
        "`resourceSpans[0].scopeSpans[0].spans` must be a list",
    ),
    (
        {"resourceSpans": [{"scopeSpans": [{"scope": "x", "spans": []}]}]},
        "`resourceSpans[0].scopeSpans[0].scope` must be an object",
    ),
    ({"resourceSpans": [7]}, "`resourceSpans[0]` must be an object"),
    ({"resourceSpans": [{"resource": []}]}, "`resourceSpans[0].resource` must be an object"),
    (
        {"resourceSpans": [{"resource": {"attributes": 3}}]},
        "`resourceSpans[0].resource`: `attributes` must be a list",
    ),
    ({"resourceSpans": {"x": 1}}, "`(body).resourceSpans` must be a list, not an object"),
]


def test_malformed_containers_are_400_naming_the_field(server: InProcessTracecard) -> None:
    for document, field in MALFORMED:
        response = _post(server, document)
        assert response.status_code == 400, (document, response.text)
        assert field in response.json()["message"], document


def test_nul_in_span_names_attributes_and_config_names_is_stored(
    server: InProcessTracecard,
) -> None:
    run = _new_run(server, config_name="agent\x00v2")
    assert run["id"]
    attributes = [{"key": "prompt\x00", "value": {"stringValue": "a\x00b"}}]
    document = _document(
        _span("chat\x00gpt", traceId=run["trace_id"], attributes=attributes),
        _span("plain", traceId=run["trace_id"]),
    )
    response = _post(server, document, **{"tracecard-run": run["id"]})
    assert response.status_code == 200, response.text
    stored = _spans(server, run["id"])
    sqlite = server.settings.db.startswith("sqlite")
    name = "chat\x00gpt" if sqlite else "chat\ufffdgpt"
    assert name in stored and "plain" in stored
    assert stored[name]["attributes"]["prompt" + name[4]] == "a" + name[4] + "b"


def test_u64_times_are_stored_without_loss(server: InProcessTracecard) -> None:
    run = _new_run(server)
    top = str((1 << 64) - 1)
    document = _document(
        _span("at-2^63", traceId=run["trace_id"], startTimeUnixNano=str(1 << 63)),
        _span("at-max", traceId=run["trace_id"], startTimeUnixNano=top, endTimeUnixNano=top),
        _span("beyond", traceId=run["trace_id"], startTimeUnixNano=str(1 << 64)),
        _span("ordinary", traceId=run["trace_id"]),
    )
    response = _post(server, document, **{"tracecard-run": run["id"]})
    assert response.status_code == 200, response.text
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert (
        "spans[2] ('beyond'): `startTimeUnixNano` must be an unsigned 64-bit"
        in (partial["errorMessage"])
    )
    stored = _spans(server, run["id"])
    assert stored["at-2^63"]["start_time_unix_nano"] == 1 << 63
    assert stored["at-max"]["start_time_unix_nano"] == (1 << 64) - 1
    assert stored["at-max"]["end_time_unix_nano"] == (1 << 64) - 1
    assert "ordinary" in stored and "beyond" not in stored


def test_too_many_spans_is_413_that_says_what_to_change(server: InProcessTracecard) -> None:
    run = _new_run(server)
    spans = [_span(f"s{i}", traceId=run["trace_id"]) for i in range(MAX_SPANS + 1)]
    response = _post(server, _document(*spans), **{"tracecard-run": run["id"]})
    assert response.status_code == 413, response.text
    message = response.json()["message"]
    assert f"{MAX_SPANS + 1} spans, over the limit of {MAX_SPANS}" in message
    assert "otlp_max_spans" in message
    assert not any(name.startswith("s") for name in _spans(server, run["id"]))  # none stored
    at_limit = [_span(f"s{i}", traceId=run["trace_id"]) for i in range(MAX_SPANS)]
    assert _post(server, _document(*at_limit), **{"tracecard-run": run["id"]}).status_code == 200
    assert sum(name.startswith("s") for name in _spans(server, run["id"])) == MAX_SPANS


def test_healthz_reports_what_the_recorder_did(server: InProcessTracecard) -> None:
    run = _new_run(server)
    finished = server.client.post(f"/api/runs/{run['id']}/finish", json={})
    assert finished.status_code in (200, 201), finished.text
    _spans(server, run["id"])  # reading a run's spans flushes the recorder
    health = server.client.get("/healthz").json()
    assert health["status"] == "ok"
    recording = health["recording"]
    assert recording["spooled"] >= 1 and recording["stored"] == recording["spooled"]
    assert recording["dropped"] == 0 and recording["lost"] == 0
    assert {"repaired", "busy_retries", "recovered", "left_in_spool"} <= recording.keys()
