"""Upstreams and agents that break the rules: every call still ends as a span, none as a 500.

Real tracecard (uvicorn) in front of the scripted upstream (`tests/servers/fake_upstream.py`),
which does what a real MCP server will not: a wrong Content-Length, a huge answer, echoing
JSON nested deeper than orjson writes.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers.fake_upstream import FakeUpstream, fake_upstream
from tests.support.proxy import MCP_HEADERS, named, new_run, rpc, run_spans, tracecard_for
from tests.support.tracecard import RunningServer
from tracecard.server.proxy.relay import BUFFER_MAX
from tracecard.server.recording.redaction import DEEP_MARKER


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with fake_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def tracecard(
    fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    upstreams: dict[str, dict[str, Any]] = {
        "echo": {"url": f"{fake.url}/mcp"},
        "short": {"url": f"{fake.url}/short"},
        "long": {"url": f"{fake.url}/long"},
        "huge": {"url": f"{fake.url}/huge"},
        "resume": {"url": f"{fake.url}/resume"},
        "api": {"url": f"{fake.url}/api/base", "kind": "http"},
    }
    with tracecard_for(upstreams, tmp_path_factory.mktemp("hostile")) as running:
        yield running


def _call(url: str, arguments: Any, id: int = 7) -> httpx.Response:
    message = rpc("tools/call", {"name": "t", "arguments": arguments}, id=id)
    body = json.dumps(message).encode()  # the json module writes what orjson cannot
    return httpx.post(url, content=body, headers=MCP_HEADERS, timeout=60)


def _deep(levels: int) -> Any:
    node: Any = {"leaf": True}
    for _ in range(levels):
        node = {"down": node}
    return node


@pytest.mark.parametrize("upstream", ["short", "long"])
def test_a_wrong_content_length_is_a_jsonrpc_error_and_a_span(
    tracecard: RunningServer, upstream: str
) -> None:
    """Fewer or more bytes than declared: a JSON-RPC error for the call, never a cut 200."""
    run = new_run(tracecard.url)
    answer = _call(run["urls"][upstream], {"x": 1})
    assert answer.status_code == 200
    error = answer.json()
    assert error["id"] == 7 and error["error"]["code"] == -32000
    assert "broke off" in error["error"]["message"]
    span = named(run_spans(tracecard.url, run["id"]), "tools/call t")
    assert span["attributes"]["error.type"] == "upstream_protocol_error"
    assert span["status"]["code"] == 2  # ERROR


def test_deep_arguments_and_results_pass_untouched_and_are_stored_clipped(
    tracecard: RunningServer,
) -> None:
    """300 levels (orjson writes 254): forwarded as sent, answered as sent, stored with a marker."""
    run = new_run(tracecard.url)
    arguments = _deep(300)
    answer = _call(run["urls"]["echo"], arguments)
    assert answer.status_code == 200
    assert answer.json()["result"]["echo"]["arguments"] == arguments  # the upstream's own answer
    span = named(run_spans(tracecard.url, run["id"]), "tools/call t")
    attributes = span["attributes"]
    assert DEEP_MARKER in attributes["gen_ai.tool.call.arguments"]
    assert DEEP_MARKER in attributes["gen_ai.tool.call.result"]
    assert attributes["tracecard.truncated"] is True
    assert "error.type" not in attributes


def test_an_answer_too_big_to_hold_streams_through_and_is_stored_cut(
    tracecard: RunningServer,
) -> None:
    """Past the buffer the answer streams on; the span keeps its start and the original size."""
    run = new_run(tracecard.url)
    size = BUFFER_MAX + 1024 * 1024
    message = rpc("tools/call", {"name": "t", "arguments": {}, "size": size}, id=3)
    answer = httpx.post(run["urls"]["huge"], json=message, headers=MCP_HEADERS, timeout=120)
    assert answer.status_code == 200
    assert answer.json()["result"]["content"][0]["text"] == "x" * size
    span = named(run_spans(tracecard.url, run["id"]), "tools/call t")
    result = span["attributes"]["gen_ai.tool.call.result"]
    assert result.startswith('{"jsonrpc": "2.0"') and len(result) < 300 * 1024
    assert f"original size {len(answer.content)} bytes" in result
    assert span["attributes"]["tracecard.truncated"] is True


def test_a_proxied_answer_has_the_upstream_server_header_and_one_date(
    tracecard: RunningServer,
) -> None:
    """uvicorn adds neither `server: uvicorn` nor a second `date` to what the upstream sent."""
    run = new_run(tracecard.url)
    answer = httpx.post(run["urls"]["echo"], json=rpc("ping"), headers=MCP_HEADERS, timeout=10)
    assert answer.status_code == 200
    assert answer.headers.get_list("server") == ["fake-upstream"]
    assert len(answer.headers.get_list("date")) == 1
    api = httpx.get(f"{tracecard.url}/healthz", timeout=10)
    assert "server" not in api.headers and len(api.headers.get_list("date")) == 1


def test_a_stream_closed_after_priming_is_resumed_and_closes_the_span(
    tracecard: RunningServer,
) -> None:
    """SEP-1699: no invented error on the POST stream; the answer on the GET closes the span."""
    run = new_run(tracecard.url)
    url = run["urls"]["resume"]
    posted = httpx.post(url, json=rpc("tools/call", {"name": "t"}, id=9), headers=MCP_HEADERS)
    assert posted.status_code == 200
    assert posted.content == b"id: r-1\r\nretry: 50\r\ndata: \r\n\r\n"  # as sent, nothing added
    resumed = httpx.get(url, headers={"accept": "text/event-stream", "last-event-id": "r-1"})
    assert b'"resumed": "r-1"' in resumed.content
    span = named(run_spans(tracecard.url, run["id"]), "tools/call t")
    assert json.loads(span["attributes"]["gen_ai.tool.call.result"]) == {"resumed": "r-1"}
    assert "error.type" not in span["attributes"]


def _raw_get(server: RunningServer, path: str) -> tuple[int, Any]:
    """GET `path` byte for byte (httpx would resolve `..` and re-encode before sending)."""
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("sent", "received"),
    [
        ("a%2Fb%3Fc%23d", "/api/base/a%2Fb%3Fc%23d"),  # encoded stays encoded
        ("x/../y/./z", "/api/base/y/z"),  # dot segments resolved below the base
        ("caf%C3%A9?q=%2F", "/api/base/caf%C3%A9"),
    ],
)
def test_plain_http_forwards_the_raw_path_below_the_base(
    tracecard: RunningServer, sent: str, received: str
) -> None:
    status, echo = _raw_get(tracecard, f"/http/api/{sent}")
    assert status == 200, echo
    assert echo["path"] == received


@pytest.mark.parametrize(
    "sent", ["../../admin/x", "a/../../admin", "a%2F..%2F..%2Fadmin", "%2e%2e/admin"]
)
def test_plain_http_paths_cannot_climb_above_the_base(tracecard: RunningServer, sent: str) -> None:
    status, error = _raw_get(tracecard, f"/http/api/{sent}")
    assert status == 400 and "base path" in error["detail"], error


@pytest.mark.parametrize("sent", ["a%0d%0aX-Injected:%201", "a%00b", "a%09b", "a%zz"])
def test_plain_http_paths_with_bytes_that_cannot_be_sent_are_400(
    tracecard: RunningServer, sent: str
) -> None:
    run = new_run(tracecard.url)
    status, error = _raw_get(tracecard, f"/runs/{run['id']}/http/api/{sent}")
    assert status == 400, error
    assert "control character" in error["detail"] or "% escape" in error["detail"]
