"""Replay protocol by protocol (docs/replay.md): the session protocol with the official SDK
(and a real session behind it when a request goes live), its answers as SSE events, a stdio
upstream with no process started, and an openai-agents agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agents import Agent as OpenAIAgent
from agents import Runner, function_tool
from agents.mcp import MCPServerStreamableHttp
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp.client.client import Client

from tests.support.replay_world import DESK_SUITE, World, open_world, proxied, spans_of
from tracecard.client import AsyncTracecardClient, TracecardClient


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with open_world(tmp_path_factory.mktemp("replay-protocols")) as found:
        yield found


async def _legacy_trial(url: str, status: str) -> tuple[Any, Any]:
    """The session protocol (2025-11-25) with the official SDK client: list, then call."""
    async with Client(url, mode="legacy") as client:
        tools = await client.list_tools()
        result = await client.call_tool("list_tickets", {"status": status, "priority": "urgent"})
    names = sorted(t.name for t in tools.tools)
    return names, result.model_dump(mode="json", exclude_none=True)


async def test_session_protocol_replays_and_goes_live_in_a_real_session(world: World) -> None:
    async with AsyncTracecardClient(world.server.url) as client:
        source = await client.create_experiment(world.suite, {"name": "legacy"}, 1)
        run = next(r for r in source.runs if r.task_id == "count")
        live = await _legacy_trial(run.urls["helpdesk"], "open")
        await client.finish_run(run.id, final_answer="2")
        for on_miss in ("error", "live"):
            before = world.helpdesk.requests
            replay = {"source": source.id, "on_miss": on_miss}
            replayed = await client.create_experiment(world.suite, {"name": on_miss}, 1, replay)
            run = next(r for r in replayed.runs if r.task_id == "count")
            assert await _legacy_trial(run.urls["helpdesk"], "open") == live
            assert world.helpdesk.requests == before
            if on_miss == "live":  # another status: not recorded, answered by a real session
                async with Client(run.urls["helpdesk"], mode="legacy") as mcp:
                    other = await mcp.call_tool("list_tickets", {"status": "closed"})
                assert world.helpdesk.requests > before and not other.is_error
            await client.finish_run(run.id, final_answer="2")
            spans = proxied(spans_of(world, run.id))
            session = {s["attributes"].get("mcp.session.id") for s in spans}
            assert all(str(v).startswith("replay-") for v in session), session
            marks = [s["attributes"].get("tracecard.replay") for s in spans]
            assert marks.count("live") == (1 if on_miss == "live" else 0), marks


def _session_call(url: str) -> tuple[str, list[Any]]:
    """The session protocol by hand: initialize, initialized, one tools/call (SSE accepted);
    the call's content type and its events."""
    accept = {"accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    with httpx.Client(headers=accept, timeout=30) as http:
        session = http.post(url, json=hello).headers["mcp-session-id"]
        ids = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=ids)
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "get_ticket", "arguments": {"ticket_id": "T-1001"}},
        }
        response = http.post(url, json=call, headers=ids)
    lines = response.text.splitlines()
    return response.headers["content-type"], [json.loads(x[6:]) for x in lines if x[:6] == "data: "]


def test_a_session_protocol_answer_is_replayed_as_sse_events(world: World) -> None:
    with TracecardClient(world.server.url) as client:
        source = client.create_experiment(world.suite, {"name": "sse"}, 1)
        run = next(r for r in source.runs if r.task_id == "count")
        live_type, live = _session_call(run.urls["helpdesk"])
        client.finish_run(run.id, final_answer="2")
        replay = client.create_experiment(world.suite, {"name": "sse"}, 1, {"source": source.id})
        run = next(r for r in replay.runs if r.task_id == "count")
    before = world.helpdesk.requests
    replayed_type, replayed = _session_call(run.urls["helpdesk"])
    assert world.helpdesk.requests == before
    assert live_type.startswith("text/event-stream") and replayed_type.startswith(live_type)
    assert replayed == live and len(live) == 1 and live[0]["id"] == 7


async def test_stdio_upstream_replays_without_starting_a_process(world: World) -> None:
    async with AsyncTracecardClient(world.server.url) as client:
        suite = (await client.add_suite_text(DESK_SUITE, "toml"))["version"]
        source = await client.create_experiment(suite, {"name": "desk"}, 1)
        live = await _legacy_trial(source.runs[0].urls["desk"], "open")
        first = await client.finish_run(source.runs[0].id, final_answer="2")
        started = world.starts.read_text().count("start")
        assert started >= 1
        replay = await client.create_experiment(suite, {"name": "desk"}, 1, {"source": source.id})
        assert await _legacy_trial(replay.runs[0].urls["desk"], "open") == live
        again = await client.finish_run(replay.runs[0].id, final_answer="2")
    assert world.starts.read_text().count("start") == started  # no process was started
    assert [(s["component"], s["value"]) for s in again["scores"]] == [
        (s["component"], s["value"]) for s in first["scores"]
    ]
    spans = proxied(spans_of(world, replay.runs[0].id))
    calls = [s for s in spans if s["attributes"]["mcp.method.name"] in ("tools/call", "tools/list")]
    assert {s["attributes"]["tracecard.role"] for s in calls} == {"agent", "verifier"}
    assert {s["attributes"].get("tracecard.replay") for s in calls} == {"recorded"}


# per task: the scripted model's turns (the assign task also reads the plain HTTP kb tool)
OPENAI_AGENTS_SCRIPTS: dict[str, list[list[Any]]] = {
    "count": [
        [function_call("list_tickets", {"status": "open", "priority": "urgent"}, call_id="c1")],
        [assistant_message("2")],
    ],
    "assign": [
        [function_call("find_users", {"query": "dana"}, call_id="a1")],
        [
            function_call(
                "update_ticket", {"ticket_id": "T-1002", "assignee": "u-108"}, call_id="a2"
            )
        ],
        [function_call("kb_lookup", {"topic": "printer"}, call_id="a3")],
        [assistant_message("assigned T-1002 to Dana")],
    ],
}


async def _openai_agents_trial(task: str, instruction: str, urls: dict[str, str]) -> str:
    model = ScriptedModel(OPENAI_AGENTS_SCRIPTS[task])

    @function_tool
    async def kb_lookup(topic: str) -> str:
        """Look a topic up in the knowledge base (a plain HTTP tool, through tracecard)."""
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(f"{urls['kb']}lookup", json={"topic": topic})
        return response.text

    async with MCPServerStreamableHttp(params={"url": urls["helpdesk"]}, name="desk") as server:
        agent = OpenAIAgent(
            name="desk",
            instructions="Use tools.",
            model=model,
            mcp_servers=[server],
            tools=[kb_lookup],
        )
        result = await Runner.run(agent, instruction)
    model.assert_complete()
    return str(result.final_output)


async def _openai_agents_experiment(
    client: AsyncTracecardClient, world: World, replay: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """Both tasks (MCP and plain HTTP tools), one trial; (experiment id, finish by task)."""
    experiment = await client.create_experiment(
        world.suite, {"name": "openai-agents"}, 1, replay=replay
    )
    finished = {}
    for run in experiment.runs:
        answer = await _openai_agents_trial(run.task_id, run.instruction, run.urls)
        finish = await client.finish_run(run.id, final_answer=answer)
        finished[run.task_id] = {**finish, "run_id": run.id}
    return experiment.id, finished


async def test_an_openai_agents_agent_replays_too(world: World) -> None:
    """MCP tools and a plain HTTP tool: live, then replayed with neither server reached."""
    async with AsyncTracecardClient(world.server.url) as client:
        before_live = world.kb.requests
        source, live = await _openai_agents_experiment(client, world, None)
        assert world.kb.requests == before_live + 1  # the kb tool was called live
        before = world.requests()
        _replay, replayed = await _openai_agents_experiment(client, world, {"source": source})
    assert world.requests() == before  # neither the helpdesk nor the kb saw a request
    for task in ("count", "assign"):
        assert [(s["component"], s["value"]) for s in replayed[task]["scores"]] == [
            (s["component"], s["value"]) for s in live[task]["scores"]
        ]
        assert replayed[task]["replay"]["missed"] == 0
        spans = proxied(spans_of(world, replayed[task]["run_id"]))
        assert spans and {s["attributes"].get("tracecard.replay") for s in spans} == {"recorded"}
        if task == "assign":  # the plain HTTP call is among them
            assert any(s["attributes"].get("tracecard.upstream") == "kb" for s in spans)
    assert any(s["value"] == 1.0 for s in live["assign"]["scores"])
