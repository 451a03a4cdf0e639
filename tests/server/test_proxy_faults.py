"""Every fault the proxy must survive: each answers the agent properly and leaves a span."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers.fake_upstream import SSE_PRIMING, FakeUpstream, fake_upstream
from tests.support.processes import free_port
from tests.support.proxy import MCP_HEADERS, named, new_run, rpc, run_spans, tracecard_for
from tests.support.tracecard import RunningServer, runtime_of

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with fake_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def tracecard(
    fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    down = f"http://127.0.0.1:{free_port()}"
    upstreams: dict[str, dict[str, Any]] = {
        "fake": {"url": f"{fake.url}/mcp"},
        "down": {"url": f"{down}/mcp"},
        "slow": {"url": f"{fake.url}/slow", "timeout_s": 0.3},
        "stall": {"url": f"{fake.url}/stall", "timeout_s": 0.3},
        "dying": {"url": f"{fake.url}/sse-kill"},
        "files": {"command": ["true"]},
        "api": {"url": f"{fake.url}/api", "kind": "http"},
        "api_down": {"url": f"{down}/api", "kind": "http"},
        "api_slow": {"url": f"{fake.url}/slow", "kind": "http", "timeout_s": 0.3},
    }
    folder = tmp_path_factory.mktemp("faults")
    with tracecard_for(upstreams, folder, max_body_bytes=LIMIT) as running:
        yield running


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers={**MCP_HEADERS, **headers}, timeout=10)


def test_unknown_upstream_is_404_listing_the_configured_ones(tracecard: RunningServer) -> None:
    for url in (f"{tracecard.url}/mcp/nope", f"{tracecard.url}/http/nope/x"):
        answer = post(url, rpc("ping"))
        assert answer.status_code == 404
        body = answer.json()
        assert "'nope'" in body["detail"] and "fake" in body["detail"]
        assert body["upstreams"] == sorted(body["upstreams"]) and "api" in body["upstreams"]


def test_wrong_kind_of_upstream_is_404_naming_the_right_path(tracecard: RunningServer) -> None:
    assert "/http/api/" in post(f"{tracecard.url}/mcp/api", rpc("ping")).json()["detail"]
    assert "/mcp/fake" in httpx.get(f"{tracecard.url}/http/fake/x").json()["detail"]


@pytest.mark.parametrize("where", ["path", "header", "baggage"])
def test_unknown_run_is_404_naming_it(tracecard: RunningServer, where: str) -> None:
    if where == "path":
        answer = post(f"{tracecard.url}/runs/r-missing/mcp/fake", rpc("ping"))
    elif where == "header":
        answer = post(f"{tracecard.url}/mcp/fake", rpc("ping"), **{"Tracecard-Run": "r-missing"})
    else:
        answer = post(f"{tracecard.url}/mcp/fake", rpc("ping"), baggage="tracecard.run=r-missing")
    assert answer.status_code == 404
    assert "'r-missing'" in answer.json()["detail"]


def test_upstream_down_gives_a_jsonrpc_error_with_the_id(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    answer = post(run["urls"]["down"], rpc("tools/call", {"name": "x", "arguments": {}}, id=41))
    assert answer.status_code == 200
    reply = answer.json()
    assert reply["id"] == 41 and reply["error"]["code"] == -32000
    assert "'down' is unavailable" in reply["error"]["message"]
    span = named(run_spans(tracecard.url, run["id"]), "tools/call x")
    assert span["attributes"]["error.type"] == "upstream_unavailable"
    assert span["status"]["code"] == 2


def test_upstream_slower_than_the_timeout(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    answer = post(run["urls"]["slow"], rpc("tools/call", {"name": "wait", "arguments": {}}, id="t"))
    reply = answer.json()
    assert reply["id"] == "t" and "did not answer within 0.3s" in reply["error"]["message"]
    span = named(run_spans(tracecard.url, run["id"]), "tools/call wait")
    assert span["attributes"]["error.type"] == "timeout"


def test_an_answer_whose_body_stalls_is_bounded_by_the_same_timeout(
    tracecard: RunningServer,
) -> None:
    """The head came in time, half the body, then nothing: the call's one deadline ends the
    wait for the rest, and the agent gets a JSON-RPC error (nothing of the answer was sent)."""
    run = new_run(tracecard.url)
    answer = post(run["urls"]["stall"], rpc("tools/call", {"name": "half", "arguments": {}}, id=5))
    reply = answer.json()  # (unbounded, the whole answer would come after 3 s, a success)
    assert reply["id"] == 5 and "did not answer within 0.3s" in reply["error"]["message"]
    span = named(run_spans(tracecard.url, run["id"]), "tools/call half")
    assert span["attributes"]["error.type"] == "timeout"


def test_upstream_dying_mid_stream(tracecard: RunningServer, fake: FakeUpstream) -> None:
    run = new_run(tracecard.url)
    message = rpc("tools/call", {"name": "work", "arguments": {}}, id=9)
    with httpx.stream("POST", run["urls"]["dying"], json=message, headers=MCP_HEADERS) as response:
        received = b"".join(response.iter_raw())
    sent = fake.sent["/sse-kill"]
    assert received.startswith(sent) and received.startswith(SSE_PRIMING)  # nothing lost
    tail = received[len(sent) :].decode()
    reply = json.loads(tail.split("data: ", 1)[1].split("\r\n", 1)[0])
    assert reply["id"] == 9 and reply["error"]["data"]["reason"] == "upstream_protocol_error"
    span = named(run_spans(tracecard.url, run["id"]), "tools/call work")
    assert span["attributes"]["error.type"] == "upstream_protocol_error"
    assert [e["name"] for e in span["events"]] == ["notifications/progress"]  # kept


def test_body_over_the_limit_is_413_declared_or_streamed(tracecard: RunningServer) -> None:
    url = f"{tracecard.url}/mcp/fake"
    big = json.dumps(rpc("tools/call", {"name": "x", "arguments": {"t": "y" * LIMIT}})).encode()
    declared = httpx.post(url, content=big, headers=MCP_HEADERS)
    assert declared.status_code == 413 and str(LIMIT) in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 8192):
            yield big[start : start + 8192]

    streamed = httpx.post(url, content=chunks(), headers=MCP_HEADERS)
    assert streamed.status_code == 413 and str(LIMIT) in streamed.json()["detail"]
    plain = httpx.post(f"{tracecard.url}/http/api/x", content=chunks())
    assert plain.status_code == 413


def test_stdio_upstream_without_a_bridge_is_501(tracecard: RunningServer) -> None:
    runtime = runtime_of(tracecard)
    installed, runtime.stdio = runtime.stdio, None
    try:
        answer = post(f"{tracecard.url}/mcp/files", rpc("ping"))
    finally:
        runtime.stdio = installed
    assert answer.status_code == 501 and "stdio" in answer.json()["detail"]


def test_stdio_upstream_goes_to_the_bridge(tracecard: RunningServer) -> None:
    runtime = runtime_of(tracecard)
    calls: list[tuple[str, str]] = []

    async def bridge(scope: Any, receive: Any, send: Any, name: str, run: Any) -> None:
        calls.append((name, run.id))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"bridged"})

    installed, runtime.stdio = runtime.stdio, bridge  # type: ignore[assignment]
    try:
        run = new_run(tracecard.url)
        answer = post(run["urls"]["files"], rpc("ping"))
    finally:
        runtime.stdio = installed
    assert answer.text == "bridged" and calls == [("files", run["id"])]


def test_plain_http_upstream_down_is_502_and_slow_is_504(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    down = httpx.get(run["urls"]["api_down"] + "items")
    assert down.status_code == 502 and "'api_down' is unavailable" in down.json()["detail"]
    slow = httpx.get(run["urls"]["api_slow"] + "items")
    assert slow.status_code == 504
    spans = run_spans(tracecard.url, run["id"])
    assert [s["attributes"]["error.type"] for s in spans] == ["upstream_unavailable", "timeout"]
    assert all(s["name"] == "GET /items" for s in spans)


def test_plain_http_server_error_is_recorded(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    assert httpx.delete(run["urls"]["api"] + "things/broken").status_code == 500
    span = named(run_spans(tracecard.url, run["id"]), "DELETE /things/broken")
    assert span["attributes"]["error.type"] == "500"


def test_other_paths_still_reach_the_api(tracecard: RunningServer) -> None:
    assert httpx.get(f"{tracecard.url}/healthz").json()["status"] == "ok"
    assert httpx.get(f"{tracecard.url}/runs/abc/spans").status_code == 404  # not a proxy path
