"""Agent frameworks pointed at the proxy with nothing else changed: openai-agents with its
`ScriptedModel` and an MCP streamable-HTTP server, recorded as spans of one run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest
from agents import Agent, Runner
from agents.mcp import MCPServerStreamableHttp
from agents.testing import ScriptedModel, assistant_message, function_call

from tests.support.processes import mcp_tool_server
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.server.settings import Settings


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("frameworks")
    with mcp_tool_server() as upstream:
        settings = Settings.model_validate(
            {
                "db": f"sqlite:///{folder / 'tracecard.db'}",
                "sandbox_root": str(folder / "sandboxes"),
                "upstreams": {"tools": {"url": upstream}},
                "recording": {"batch_delay_ms": 50},
            }
        )
        with running_tracecard(settings) as running:
            yield running


async def test_openai_agents_scripted_model_through_the_proxy(server: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        run = (await http.post("/api/runs", json={"config": {"name": "openai-agents"}})).json()
        model = ScriptedModel(
            [
                [function_call("add", {"a": 2, "b": 40}, call_id="c1")],
                [function_call("echo", {"text": "forty-two"}, call_id="c2")],
                [assistant_message("The answer is 42")],
            ]
        )
        async with MCPServerStreamableHttp(
            params={"url": run["urls"]["tools"]}, name="tools", cache_tools_list=True
        ) as mcp_server:
            agent = Agent(
                name="calc", instructions="Use tools.", model=model, mcp_servers=[mcp_server]
            )
            result = await Runner.run(agent, "What is 2 + 40?")
        assert result.final_output == "The answer is 42"
        model.assert_complete()

        await http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": result.final_output})
        spans = (await http.get(f"/api/runs/{run['id']}/spans")).json()["spans"]
    calls = [s for s in spans if s["attributes"].get("mcp.method.name") == "tools/call"]
    assert [c["name"] for c in calls] == ["tools/call add", "tools/call echo"]
    assert orjson.loads(calls[0]["attributes"]["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 40}
    assert "42" in calls[0]["attributes"]["gen_ai.tool.call.result"]
    assert (
        orjson.loads(calls[1]["attributes"]["gen_ai.tool.call.result"])["content"][0]["text"]
        == "forty-two"
    )
    assert all(c["attributes"]["tracecard.run.id"] == run["id"] for c in calls)
    assert all(c["trace_id"] == run["trace_id"] for c in calls)
    root = next(s for s in spans if s["span_id"] == run["root_span_id"])
    assert root["name"] == "invoke_agent openai-agents"
    assert {c["parent_span_id"] for c in calls} == {root["span_id"]}
