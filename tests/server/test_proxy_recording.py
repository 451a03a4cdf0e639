"""What the proxy records: redaction, caps, trace continuation, batches, enforce mode, bad JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from tests.servers.fake_upstream import FakeUpstream, fake_upstream
from tests.support.processes import mcp_tool_server
from tests.support.proxy import MCP_HEADERS, named, new_run, rpc, run_spans, tracecard_for
from tests.support.tracecard import RunningServer, runtime_of
from tracecard.traces.secrets import fingerprint

CAP = 2048
AGENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with fake_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def tool_url() -> Iterator[str]:
    with mcp_tool_server() as url:
        yield url


@pytest.fixture(scope="module")
def tracecard(
    fake: FakeUpstream, tool_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    upstreams = {
        "fake": {"url": f"{fake.url}/mcp"},
        "sse": {"url": f"{fake.url}/sse"},
        "tools": {"url": tool_url},
        "api": {"url": f"{fake.url}/api", "kind": "http", "headers": {"X-Upstream-Key": "k"}},
    }
    folder = tmp_path_factory.mktemp("rec")
    with tracecard_for(upstreams, folder, recording={"payload_cap_bytes": CAP}) as running:
        yield running


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url, content=content, headers={**MCP_HEADERS, **headers}, timeout=10)


def test_secrets_are_redacted_in_spans_but_reach_the_upstream(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    run = new_run(tracecard.url)
    arguments = {"user": "ann", "password": "hunter2", "nested": {"API_KEY": "k-123"}}
    answer = post(run["urls"]["fake"], rpc("tools/call", {"name": "login", "arguments": arguments}))
    assert answer.json()["result"]["echo"]["arguments"] == arguments  # the agent sees it all
    assert fake.bodies("/mcp")[-1]["params"]["arguments"] == arguments  # so does the upstream
    span = named(run_spans(tracecard.url, run["id"]), "tools/call login")["attributes"]
    recorded = json.loads(span["gen_ai.tool.call.arguments"])
    key = runtime_of(tracecard).fingerprint_key
    assert recorded == {
        "user": "ann",
        "password": fingerprint(key, "hunter2"),
        "nested": {"API_KEY": fingerprint(key, "k-123")},
    }
    assert "hunter2" not in json.dumps(span) and "k-123" not in json.dumps(span)


def test_payloads_over_the_cap_are_cut_with_a_marker(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    text = "z" * (CAP * 4)
    post(run["urls"]["fake"], rpc("tools/call", {"name": "store", "arguments": {"text": text}}))
    span = named(run_spans(tracecard.url, run["id"]), "tools/call store")["attributes"]
    assert span["tracecard.truncated"] is True
    for key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        assert "…[truncated by tracecard: original size" in span[key]
        assert len(span[key]) < CAP + 100


def test_traceparent_header_parents_the_call_in_the_runs_trace(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    """One run, one trace: the agent's span is the parent, moved into the run's trace (the
    agent's own spans of that trace move the same way when they arrive over OTLP)."""
    run = new_run(tracecard.url)
    parent = f"00-{AGENT_TRACE}-{AGENT_SPAN}-00"  # not sampled by the agent: recorded anyway
    post(run["urls"]["fake"], rpc("tools/list", {}), traceparent=parent)
    span = named(run_spans(tracecard.url, run["id"]), "tools/list")
    assert span["trace_id"] == run["trace_id"] and span["parent_span_id"] == AGENT_SPAN
    assert span["attributes"]["tracecard.agent.trace_id"] == AGENT_TRACE
    injected = fake.bodies("/mcp")[-1]["params"]["_meta"]["traceparent"]
    assert injected == f"00-{run['trace_id']}-{span['span_id']}-01"


def test_traffic_that_names_no_run_continues_the_agents_trace(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    parent = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"
    params = {"name": "echo", "arguments": {"adhoc": True}}
    post(f"{tracecard.url}/mcp/fake", rpc("tools/call", params), traceparent=parent)
    injected = fake.bodies("/mcp")[-1]["params"]["_meta"]["traceparent"]
    assert injected.startswith(f"00-{AGENT_TRACE}-")  # an ad-hoc run keeps the agent's trace


def test_traceparent_in_meta_parents_the_call_and_is_left_alone(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    run = new_run(tracecard.url)
    parent = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"
    params = {"name": "echo", "arguments": {}, "_meta": {"traceparent": parent}}
    post(run["urls"]["fake"], rpc("tools/call", params))
    span = named(run_spans(tracecard.url, run["id"]), "tools/call echo")
    assert span["trace_id"] == run["trace_id"] and span["parent_span_id"] == AGENT_SPAN
    assert fake.bodies("/mcp")[-1]["params"]["_meta"] == {"traceparent": parent}


def test_without_traceparent_spans_hang_under_the_run_and_one_is_injected(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    run = new_run(tracecard.url)
    post(run["urls"]["fake"], rpc("tools/call", {"name": "echo", "arguments": {"a": 1}}))
    span = named(run_spans(tracecard.url, run["id"]), "tools/call echo")
    assert span["trace_id"] == run["trace_id"] and span["parent_span_id"] == run["root_span_id"]
    received = fake.bodies("/mcp")[-1]["params"]
    assert received["_meta"]["traceparent"] == f"00-{run['trace_id']}-{span['span_id']}-01"
    assert received["arguments"] == {"a": 1}


def test_run_from_header_and_from_baggage(tracecard: RunningServer) -> None:
    by_header, by_baggage = new_run(tracecard.url), new_run(tracecard.url)
    url = f"{tracecard.url}/mcp/fake"
    post(url, rpc("ping", {}), **{"Tracecard-Run": by_header["id"]})
    post(url, rpc("ping", {}), baggage=f"user=x,tracecard.run={by_baggage['id']};p=1")
    assert [s["name"] for s in run_spans(tracecard.url, by_header["id"])] == ["ping"]
    assert [s["name"] for s in run_spans(tracecard.url, by_baggage["id"])] == ["ping"]


def test_only_the_servers_verifier_key_marks_verifier_traffic(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    key = runtime_of(tracecard).verifier_key
    post(run["urls"]["fake"], rpc("tools/call", {"name": "probe"}), **{"Tracecard-Verifier": key})
    post(
        run["urls"]["fake"], rpc("tools/call", {"name": "forged"}), **{"Tracecard-Role": "verifier"}
    )
    post(run["urls"]["fake"], rpc("tools/call", {"name": "guess"}), **{"Tracecard-Verifier": "x"})
    spans = run_spans(tracecard.url, run["id"])
    assert named(spans, "tools/call probe")["attributes"]["tracecard.role"] == "verifier"
    forged = named(spans, "tools/call forged")["attributes"]
    assert forged["tracecard.role"] == "agent" and forged["tracecard.role.header"] == "verifier"
    assert named(spans, "tools/call guess")["attributes"]["tracecard.role"] == "agent"


def test_a_batch_gets_one_span_per_message_matched_by_id(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    batch = [
        rpc("tools/call", {"name": "first", "arguments": {"n": 1}}, id=10),
        rpc("notifications/progress", {"progressToken": "t", "progress": 1}, id=None),
        rpc("tools/call", {"name": "second", "arguments": {"n": 2}}, id="b"),
    ]
    answer = post(run["urls"]["fake"], batch).json()
    assert [r["id"] for r in answer] == [10, "b"]
    spans = run_spans(tracecard.url, run["id"])
    assert sorted(s["name"] for s in spans) == [
        "notifications/progress",
        "tools/call first",
        "tools/call second",
    ]
    for name, n in (("first", 1), ("second", 2)):
        result = json.loads(
            named(spans, f"tools/call {name}")["attributes"]["gen_ai.tool.call.result"]
        )
        assert result["echo"]["arguments"] == {"n": n}
    note = named(spans, "notifications/progress")["attributes"]
    assert "gen_ai.tool.call.result" not in note and "tracecard.rpc.result" not in note


def test_unparsable_json_is_forwarded_unchanged_and_recorded(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    run = new_run(tracecard.url)
    raw = b'{"jsonrpc": "2.0", "method": "tools/call", "id": '
    answer = post(run["urls"]["fake"], raw)
    assert answer.status_code == 202
    assert fake.received[-1].body == raw
    span = named(run_spans(tracecard.url, run["id"]), "mcp.unparsable")["attributes"]
    assert span["tracecard.parse_error"].startswith("not valid JSON")
    assert span["tracecard.request.body"] == raw.decode()


def test_sse_passes_through_byte_for_byte_and_notifications_become_events(
    tracecard: RunningServer, fake: FakeUpstream
) -> None:
    run = new_run(tracecard.url)
    message = rpc("tools/call", {"name": "work", "arguments": {}, "_meta": {"progressToken": 7}})
    with httpx.stream(
        "POST", run["urls"]["sse"], json=message, headers=MCP_HEADERS, timeout=10
    ) as response:
        assert response.headers["content-type"] == "text/event-stream"
        received = b"".join(response.iter_raw())
    assert received == fake.sent["/sse"]  # CRLF, the empty priming event, the comment: all kept
    span = named(run_spans(tracecard.url, run["id"]), "tools/call work")
    assert [e["name"] for e in span["events"]] == ["notifications/progress"]
    assert "ok" in span["attributes"]["gen_ai.tool.call.result"]
    assert "error.type" not in span["attributes"]


def test_plain_http_tool_span(tracecard: RunningServer, fake: FakeUpstream) -> None:
    run = new_run(tracecard.url)
    url = run["urls"]["api"] + "v1/items?limit=2"
    answer = httpx.post(
        url,
        json={"name": "x", "token": "tok-secret"},
        headers={"Authorization": "Bearer abc", "X-Custom": "kept"},
        timeout=10,
    )
    assert answer.status_code == 200
    echoed = answer.json()
    assert echoed["path"] == "/api/v1/items" and echoed["query"] == "limit=2"
    assert echoed["headers"]["authorization"] == "Bearer abc"  # forwarded unchanged
    assert echoed["headers"]["x-upstream-key"] == "k"  # the upstream's configured header
    assert echoed["headers"]["host"] == f"127.0.0.1:{fake.port}"
    span = named(run_spans(tracecard.url, run["id"]), "POST /v1/items")["attributes"]
    assert span["http.request.method"] == "POST" and span["http.response.status_code"] == 200
    assert span["url.path"] == "/v1/items" and span["url.query"] == "limit=2"
    assert span["http.request.header.authorization"] == "[REDACTED]"
    assert span["http.request.header.x-custom"] == "kept"
    assert span["http.response.header.set-cookie"] == "[REDACTED]"
    masked = fingerprint(runtime_of(tracecard).fingerprint_key, "tok-secret")
    assert json.loads(span["tracecard.request.body"]) == {"name": "x", "token": masked}
    response_token = json.loads(span["tracecard.response.body"])["token"]
    assert response_token == fingerprint(
        runtime_of(tracecard).fingerprint_key, "s3cret-response-token"
    )


def _blocker(blocked_tool: str) -> Any:
    seen: list[tuple[Any, ...]] = []

    def enforce(run: Any, upstream: str, tool: str, arguments: Any, annotations: Any) -> Any:
        seen.append((run.id, upstream, tool, arguments, annotations))
        if tool == blocked_tool:
            return SimpleNamespace(rule_id="no-destruction", message=f"{tool} is not allowed")
        return None

    enforce.seen = seen  # type: ignore[attr-defined]
    return enforce


@pytest.fixture
def enforcing(tracecard: RunningServer) -> Iterator[Any]:
    runtime = runtime_of(tracecard)
    enforce = _blocker("delete_all_notes")
    installed = runtime.hooks.enforce
    runtime.hooks.enforce = enforce
    try:
        yield enforce
    finally:
        runtime.hooks.enforce = installed


def test_enforce_blocks_and_the_upstream_never_sees_the_call(
    tracecard: RunningServer, fake: FakeUpstream, enforcing: Any
) -> None:
    run = new_run(tracecard.url)
    before = len(fake.received)
    call = rpc("tools/call", {"name": "delete_all_notes", "arguments": {"all": True}}, id=5)
    answer = post(run["urls"]["fake"], call)
    assert answer.status_code == 200
    error = answer.json()
    assert error["id"] == 5 and error["error"]["code"] == -32001
    assert "no-destruction" in error["error"]["message"]
    assert len(fake.received) == before
    assert enforcing.seen[-1][:4] == (run["id"], "fake", "delete_all_notes", {"all": True})
    span = named(run_spans(tracecard.url, run["id"]), "tools/call delete_all_notes")
    assert span["attributes"]["error.type"] == "blocked"
    assert span["attributes"]["tracecard.blocked.rule"] == "no-destruction"
    assert span["status"]["code"] == 2


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_enforce_answers_the_official_client_in_its_form(
    tracecard: RunningServer, enforcing: Any, mode: str
) -> None:
    run = new_run(tracecard.url)
    async with Client(run["urls"]["tools"], mode=mode) as client:
        await client.list_tools()
        await client.call_tool("write_note", {"key": f"keep-{mode}", "text": "still here"})
        with pytest.raises(MCPError) as blocked:
            await client.call_tool("delete_all_notes", {})
        assert blocked.value.error.code == -32001
        note = await client.call_tool("read_note", {"key": f"keep-{mode}"})
    assert note.structured_content == {"key": f"keep-{mode}", "text": "still here"}
    asked = [seen for seen in enforcing.seen if seen[2] == "delete_all_notes"][-1]
    assert asked[4] == {"destructiveHint": True, "readOnlyHint": False}  # from tools/list
    spans = run_spans(tracecard.url, run["id"])
    assert named(spans, "tools/call delete_all_notes")["attributes"]["error.type"] == "blocked"


def test_settings_pass_through_inject_off(fake: FakeUpstream, tmp_path: Path) -> None:
    upstreams = {"fake": {"url": f"{fake.url}/mcp"}}
    with tracecard_for(upstreams, tmp_path, recording={"inject_traceparent": False}) as running:
        run = new_run(running.url)
        raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}'
        post(run["urls"]["fake"], raw)
    assert fake.received[-1].body == raw  # not one byte changed
