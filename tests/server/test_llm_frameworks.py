"""Real agent frameworks with both URLs changed: the model through `/llm/...` (scripted upstream
built from the SDK's types) and the tools through `/mcp/...` (a real MCP server). One run, one
trace, each tool span linked to the model turn that asked for it, tokens, the model's answer."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents import Agent as OpenAIAgent
from agents import OpenAIResponsesModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pydantic_ai import Agent, RunContext
from pydantic_ai.mcp import CallToolFunc, MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.servers.model_upstream import model_upstream
from tests.support.processes import mcp_tool_server
from tests.support.proxy import new_run, run_spans, tracecard_for
from tests.support.tracecard import RunningServer
from tracecard.scorers.calls import agent_calls
from tracecard.scorers.model import (
    link_calls,
    model_answer,
    model_turns,
    requested_links,
    tool_names,
    unexecuted_requests,
    unread_results,
)

TOOL_SERVER = Path(__file__).resolve().parents[1] / "servers" / "tool_server.py"
HOSTILE_PROMPT = "What is 2 + 40? <script>alert(1)</script>"  # shown as text in the viewer
set_tracing_disabled(True)  # openai-agents would export its own traces to the internet


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with model_upstream() as model, mcp_tool_server() as tools:
        upstreams: dict[str, dict[str, Any]] = {
            "openai": {"url": f"{model.url}/v1", "kind": "openai"},
            "tools": {"url": tools},
            # the same tools over stdio: its bridge records with a recorder of its own
            "stdio-tools": {"command": [sys.executable, str(TOOL_SERVER), "stdio"]},
        }
        with tracecard_for(upstreams, tmp_path_factory.mktemp("llm-frameworks")) as running:
            yield running


def check_one_trace(
    base: str, run: dict[str, Any], answer: str, id_source: str = "matched"
) -> list[dict[str, Any]]:
    spans = run_spans(base, run["id"])
    assert {s["trace_id"] for s in spans} == {run["trace_id"]}  # one trial, one trace
    turns = model_turns(spans)
    calls = agent_calls(spans)
    assert [c.tool for c in calls] == ["add"]  # model spans are not tool calls
    assert len(turns) == 2 and turns[0].requested[0].tool == "add"
    assert all(t.input_tokens and t.output_tokens for t in turns)
    links = link_calls(turns, calls)
    assert [(lk.model_span_id, lk.tool_span_id) for lk in links] == [
        (turns[0].span_id, calls[0].span_id)
    ]
    assert unexecuted_requests(turns, links, tool_names(spans)) == []
    assert unread_results(turns, links) == []  # the second turn fed the result back
    found = model_answer(turns)
    assert found is not None and found[0] == answer and found[1] == turns[1].span_id
    assert "42" in calls[0].result_text  # type: ignore[operator]
    # the proxy recorded the link on the tool span: the call id and a span link (#26.2)
    tool_span = next(s for s in spans if s["span_id"] == calls[0].span_id)
    call_id = turns[0].requested[0].call_id
    assert call_id is not None
    assert tool_span["attributes"]["gen_ai.tool.call.id"] == call_id
    assert tool_span["attributes"]["tracecard.tool.call.id_source"] == id_source
    assert tool_span["links"] == [
        {
            "trace_id": run["trace_id"],
            "span_id": turns[0].span_id,
            "attributes": {"tracecard.link.type": "requested_by", "gen_ai.tool.call.id": call_id},
        }
    ]
    assert requested_links(spans) == {calls[0].span_id: (turns[0].span_id, call_id)}
    return spans


async def test_pydantic_ai_openai_model_and_mcp_toolset(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url, config={"name": "pydantic-ai"})
    provider = OpenAIProvider(base_url=run["urls"]["openai"], api_key="sk-agent")
    agent = Agent(
        OpenAIChatModel("script-agent", provider=provider),
        toolsets=[MCPToolset(run["urls"]["tools"])],
    )
    async with agent:
        result = await agent.run(HOSTILE_PROMPT)
    assert result.output.startswith("The answer is 42")
    check_one_trace(tracecard.url, run, result.output)
    page = httpx.get(f"{tracecard.url}/runs/{run['id']}", timeout=30).text
    assert "What happened" in page and "2 model turns" in page
    assert "model asks for add" in page and '<code class="call-id">call_add</code>' in page
    assert "asked by the model" in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 1  # escaped, shown once
    assert "<script>alert(1)" not in page


async def test_a_forwarded_call_id_links_and_the_otlp_export_holds_the_link(
    tracecard: RunningServer,
) -> None:
    """pydantic-ai forwards its tool-call id in the MCP request's `_meta`; the link is in the
    OTLP export, read with the OpenTelemetry protobuf types."""

    async def forward_id(
        ctx: RunContext[Any], call_tool: CallToolFunc, name: str, args: dict[str, Any]
    ) -> Any:
        return await call_tool(name, args, metadata={"gen_ai.tool.call.id": ctx.tool_call_id})

    run = new_run(tracecard.url, config={"name": "pydantic-ai"})
    provider = OpenAIProvider(base_url=run["urls"]["openai"], api_key="sk-agent")
    toolset = MCPToolset(run["urls"]["tools"], process_tool_call=forward_id)
    agent = Agent(OpenAIChatModel("script-agent", provider=provider), toolsets=[toolset])
    async with agent:
        result = await agent.run("What is 2 + 40?")
    spans = check_one_trace(tracecard.url, run, result.output, id_source="forwarded")
    chat = next(s for s in spans if s["name"].startswith("chat "))
    export = httpx.get(f"{tracecard.url}/api/runs/{run['id']}/trace.otlp.json", timeout=30)
    request = Parse(export.text, ExportTraceServiceRequest())
    exported = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    tool = next(s for s in exported if s.name == "tools/call add")
    assert len(tool.links) == 1
    # OTLP/JSON writes ids as hex; protobuf's JSON parser reads bytes fields as base64
    assert base64.b64encode(tool.links[0].span_id).decode() == chat["span_id"]
    assert base64.b64encode(tool.links[0].trace_id).decode() == run["trace_id"]
    link_attributes = {kv.key: kv.value.string_value for kv in tool.links[0].attributes}
    assert link_attributes == {
        "tracecard.link.type": "requested_by",
        "gen_ai.tool.call.id": "call_add",
    }
    tool_attributes = {kv.key: kv.value.string_value for kv in tool.attributes}
    assert tool_attributes["gen_ai.tool.call.id"] == "call_add"


async def test_a_call_to_a_stdio_upstream_links_to_the_model_span_too(
    tracecard: RunningServer,
) -> None:
    """Found by bench/real_model.py with llama-server and the stdio helpdesk: the stdio
    bridge's recorder did not see the model's requested calls, so no tool span was linked."""
    run = new_run(tracecard.url, config={"name": "pydantic-ai"})
    provider = OpenAIProvider(base_url=run["urls"]["openai"], api_key="sk-agent")
    toolset = MCPToolset(f"{tracecard.url}/runs/{run['id']}/mcp/stdio-tools")
    agent = Agent(OpenAIChatModel("script-agent", provider=provider), toolsets=[toolset])
    async with agent:
        result = await agent.run("What is 2 + 40?")
    check_one_trace(tracecard.url, run, result.output)


async def test_openai_agents_responses_model_and_mcp_server(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url, config={"name": "openai-agents"})
    client = openai.AsyncOpenAI(base_url=run["urls"]["openai"], api_key="sk-agent")
    async with MCPServerStreamableHttp(params={"url": run["urls"]["tools"]}, name="tools") as mcp:
        agent = OpenAIAgent(
            name="calc",
            instructions="Use tools.",
            model=OpenAIResponsesModel(model="script-agent", openai_client=client),
            mcp_servers=[mcp],
        )
        result = await Runner.run(agent, "What is 2 + 40?")
    assert str(result.final_output).startswith("The answer is 42")
    check_one_trace(tracecard.url, run, str(result.final_output))
    await client.close()


SUITE = """
schema_version = 1
name = "llm-e2e"

[[tasks]]
id = "add"
instruction = "What is 2 + 40?"
upstreams = ["tools", "openai"]

[tasks.invocation]
source = "model"
calls = [{ tool = "add", arguments = { a = 2, b = 40 } }]

[tasks.completion]
checks = [{ contains = "42" }]

[tasks.efficiency]
max_model_turns = 2
"""


async def test_an_experiment_scores_from_the_model_side(tracecard: RunningServer) -> None:
    """No final answer is sent: completion reads the model's; invocation the model's calls."""
    async with httpx.AsyncClient(base_url=tracecard.url, timeout=30) as http:
        toml = {"content-type": "application/toml"}
        assert (await http.post("/api/suites", content=SUITE, headers=toml)).status_code == 201
        body = {"suite": "llm-e2e", "config": {"name": "pydantic-ai"}, "trials": 1}
        run = (await http.post("/api/experiments", json=body)).json()["runs"][0]
        assert run["models"] == {"openai": "openai"}
        provider = OpenAIProvider(base_url=run["urls"]["openai"], api_key="sk-agent")
        toolset = MCPToolset(run["urls"]["tools"])
        agent = Agent(OpenAIChatModel("script-agent", provider=provider), toolsets=[toolset])
        async with agent:
            await agent.run(run["instruction"])
        finished = (await http.post(f"/api/runs/{run['id']}/finish", json={})).json()
    scores = {s["component"]: s for s in finished["scores"]}
    assert scores["completion"]["passed"] is True
    assert scores["completion"]["evidence"]["answer_source"] == "model"
    assert scores["invocation"]["passed"] is True
    assert scores["invocation"]["evidence"]["source"] == "model"
    assert scores["efficiency"]["evidence"]["model_turns"] == 2
    assert scores["efficiency"]["evidence"]["input_tokens"] > 0
    assert finished["flags"] == []
