"""The MCP proxy against the real SDK server, with the official client in both protocol modes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from tests.support.processes import mcp_tool_server
from tests.support.proxy import MCP_HEADERS, named, new_run, rpc, run_spans, tracecard_for
from tests.support.tracecard import RunningServer, await_flush, runtime_of
from tracecard.server.proxy.stream_watch import WATCH_AFTER_S

MODES = ["auto", "legacy"]
PROTOCOL = {"auto": "2026-07-28", "legacy": "2025-11-25"}
# `big` returns its text twice (content and structuredContent): a 1 MB response, just under
# the SDK client's 1 MiB limit on one SSE event.
MEGABYTE = 500_000


@pytest.fixture(scope="module")
def tool_url() -> Iterator[str]:
    with mcp_tool_server() as url:
        yield url


@pytest.fixture(scope="module")
def tracecard(tool_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with tracecard_for({"tools": {"url": tool_url}}, tmp_path_factory.mktemp("tc")) as running:
        yield running


async def _session(url: str, mode: str) -> dict[str, Any]:
    """Everything the client sees of one scripted session."""
    async with Client(url, mode=mode) as client:
        tools = await client.list_tools()
        seen: dict[str, Any] = {"tools": sorted(t.name for t in tools.tools)}
        seen["protocol"] = client.protocol_version
        for name, args in [
            ("echo", {"text": "héllo"}),
            ("fail", {"message": "boom"}),
            ("weather", {"city": "Oslo"}),
            ("big", {"size": MEGABYTE}),
        ]:
            result = await client.call_tool(name, args)
            seen[name] = result.model_dump(exclude={"meta"})
    return seen


@pytest.mark.parametrize("mode", MODES)
async def test_client_sees_what_a_direct_connection_sees(
    tracecard: RunningServer, tool_url: str, mode: str
) -> None:
    run = new_run(tracecard.url)
    direct = await _session(tool_url, mode)
    proxied = await _session(run["urls"]["tools"], mode)
    assert proxied == direct
    assert proxied["protocol"] == PROTOCOL[mode]
    assert proxied["fail"]["is_error"] is True
    assert proxied["weather"]["structured_content"] == {
        "city": "Oslo",
        "celsius": 21.5,
        "conditions": "sunny",
    }
    assert len(proxied["big"]["content"][0]["text"]) == MEGABYTE


@pytest.mark.parametrize("mode", MODES)
async def test_each_call_is_a_span_with_its_attributes(tracecard: RunningServer, mode: str) -> None:
    run = new_run(tracecard.url, config={"name": f"sdk-{mode}"})
    await _session(run["urls"]["tools"], mode)
    spans = run_spans(tracecard.url, run["id"])
    assert all(s["attributes"]["tracecard.run.id"] == run["id"] for s in spans)
    assert all(s["trace_id"] == run["trace_id"] for s in spans)
    assert all(s["parent_span_id"] == run["root_span_id"] for s in spans)
    assert all(s["kind"] == 3 for s in spans)
    listed = [s for s in spans if s["name"] == "tools/list"]
    assert listed and "echo" in listed[0]["attributes"]["tracecard.rpc.result"]

    echo = named(spans, "tools/call echo")["attributes"]
    assert echo["mcp.method.name"] == "tools/call"
    assert echo["gen_ai.operation.name"] == "execute_tool"
    assert echo["gen_ai.tool.name"] == "echo"
    assert json.loads(echo["gen_ai.tool.call.arguments"]) == {"text": "héllo"}
    assert json.loads(echo["gen_ai.tool.call.result"])["content"][0]["text"] == "héllo"
    assert json.loads(echo["tracecard.tool.annotations"]) == {"readOnlyHint": True}
    assert echo["mcp.protocol.version"] == PROTOCOL[mode]
    assert echo["server.address"] == "127.0.0.1" and echo["network.transport"] == "tcp"
    assert echo["tracecard.upstream"] == "tools" and echo["tracecard.role"] == "agent"
    assert "jsonrpc.request.id" in echo and "error.type" not in echo
    if mode == "legacy":
        assert echo["mcp.session.id"]
        assert named(spans, "initialize")["attributes"]["mcp.session.id"] == echo["mcp.session.id"]
        initialized = named(spans, "notifications/initialized")
        assert "jsonrpc.request.id" not in initialized["attributes"]
        assert "gen_ai.tool.call.result" not in initialized["attributes"]
    else:
        assert "mcp.session.id" not in echo

    fail = named(spans, "tools/call fail")
    assert fail["attributes"]["error.type"] == "tool_error"
    assert fail["attributes"]["tracecard.tool.is_error"] is True
    assert fail["status"]["code"] == 2

    weather_span = named(spans, "tools/call weather")
    weather = json.loads(weather_span["attributes"]["gen_ai.tool.call.result"])
    assert weather["structuredContent"]["city"] == "Oslo"

    big = named(spans, "tools/call big")["attributes"]
    assert big["tracecard.truncated"] is True
    assert big["gen_ai.tool.call.result"].endswith("bytes]")
    assert "truncated by tracecard: original size" in big["gen_ai.tool.call.result"]
    assert len(big["gen_ai.tool.call.result"]) < 300 * 1024


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_client_in_order(tracecard: RunningServer, mode: str) -> None:
    run = new_run(tracecard.url)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(run["urls"]["tools"], mode=mode) as client:
        result = await client.call_tool("progress", {"steps": 4}, progress_callback=on_progress)
    assert result.content[0].text == "done 4"  # type: ignore[union-attr]
    assert seen == [(float(i), 4.0, f"step {i}") for i in range(1, 5)]
    span = named(run_spans(tracecard.url, run["id"]), "tools/call progress")
    events = [e for e in span["events"] if e["name"] == "notifications/progress"]
    assert [json.loads(e["attributes"]["tracecard.rpc.params"])["progress"] for e in events] == [
        1,
        2,
        3,
        4,
    ]


async def test_ad_hoc_runs_per_session_and_per_client(tracecard: RunningServer) -> None:
    """Traffic naming no run is recorded too: a run per MCP session, one per stateless client."""
    from sqlmodel import select

    from tracecard.traces.models import RunRow, SpanRow

    for mode in [*MODES, "legacy"]:
        async with Client(f"{tracecard.url}/mcp/tools", mode=mode) as client:
            await client.call_tool("echo", {"text": f"adhoc-{mode}"})
    runtime = runtime_of(tracecard)
    await_flush(tracecard)
    with runtime.store.session() as session:
        spans = session.scalars(select(SpanRow).where(SpanRow.tool_name == "echo")).all()
        by_text = {}
        for span in spans:
            text = json.loads(span.attributes["gen_ai.tool.call.arguments"])["text"]
            by_text.setdefault(text, set()).add(span.run_id)
        runs = {r.id: r for r in session.scalars(select(RunRow)).all()}
    legacy_runs = by_text["adhoc-legacy"]
    assert len(legacy_runs) == 2  # two sessions, two runs
    assert len(by_text["adhoc-auto"]) == 1
    for run_id in legacy_runs | by_text["adhoc-auto"]:
        assert runs[run_id].adhoc_key
    stateless = runs[next(iter(by_text["adhoc-auto"]))]
    assert stateless.adhoc_key.startswith("client:127.0.0.1:tools:mcp")  # clientInfo name
    assert stateless.status == "running"  # until idle (tests/server/test_adhoc_runs.py)


async def test_a_pydantic_ai_agent_through_the_proxy(tracecard: RunningServer) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    script = [
        ToolCallPart("write_note", {"key": "k1", "text": "first"}),
        ToolCallPart("add", {"a": 2, "b": 3}),
        ToolCallPart("read_note", {"key": "k1"}),
    ]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step < len(script):
            return ModelResponse(parts=[script[step]])
        return ModelResponse(parts=[TextPart("all done")])

    run = new_run(tracecard.url, config={"name": "pydantic-ai"})
    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(run["urls"]["tools"])])
    async with agent:
        result = await agent.run("take notes")
    assert result.output == "all done"
    spans = run_spans(tracecard.url, run["id"])
    calls = [s for s in spans if s["attributes"].get("mcp.method.name") == "tools/call"]
    assert [s["name"] for s in calls] == [
        "tools/call write_note",
        "tools/call add",
        "tools/call read_note",
    ]
    arguments = [json.loads(s["attributes"]["gen_ai.tool.call.arguments"]) for s in calls]
    assert arguments == [{"key": "k1", "text": "first"}, {"a": 2, "b": 3}, {"key": "k1"}]
    results = [json.loads(s["attributes"]["gen_ai.tool.call.result"]) for s in calls]
    assert results[0]["content"][0]["text"] == "stored k1"
    assert results[1]["structuredContent"] == {"result": 5.0}
    assert results[2]["structuredContent"] == {"key": "k1", "text": "first"}


@pytest.mark.postgres
async def test_proxy_records_on_postgresql(tool_url: str, pg_url: str, tmp_path: Path) -> None:
    with tracecard_for({"tools": {"url": tool_url}}, tmp_path, db=pg_url) as running:
        run = new_run(running.url)
        async with Client(run["urls"]["tools"], mode="legacy") as client:
            await client.call_tool("add", {"a": 1, "b": 2})
        spans = run_spans(running.url, run["id"])
    add = named(spans, "tools/call add")
    assert json.loads(add["attributes"]["gen_ai.tool.call.result"])["structuredContent"] == {
        "result": 3.0
    }


def test_an_agent_that_hangs_up_on_an_sse_answer_ends_its_call_as_disconnected(
    tracecard: RunningServer,
) -> None:
    """The stream's watcher starts only once a stream has lasted a moment (server/proxy/relay.py,
    `StreamWatch`); an agent that leaves a slow call's SSE answer is still seen: the span ends
    `client_disconnected` long before the tool would have answered."""
    run = new_run(tracecard.url)
    url = run["urls"]["tools"]
    init = rpc(
        "initialize",
        {"protocolVersion": PROTOCOL["legacy"], "capabilities": {}, "clientInfo": {"name": "t"}},
    )
    with httpx.Client(timeout=10) as http:
        opened = http.post(url, json=init, headers=MCP_HEADERS)
        session = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        session["mcp-protocol-version"] = PROTOCOL["legacy"]
        http.post(url, json=rpc("notifications/initialized", id=None), headers=session)
        started = time.monotonic()
        call = rpc("tools/call", {"name": "slow", "arguments": {"seconds": 20}}, id=2)
        with http.stream("POST", url, json=call, headers=session) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            time.sleep(WATCH_AFTER_S + 0.2)  # past the watcher's start
        # leaving the block closes the connection: the agent hung up
    deadline = time.monotonic() + 10
    while True:
        slow = [s for s in run_spans(tracecard.url, run["id"]) if s["name"] == "tools/call slow"]
        if slow or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(slow) == 1
    assert slow[0]["attributes"]["error.type"] == "client_disconnected"
    assert time.monotonic() - started < 15  # not the tool's 20 s
