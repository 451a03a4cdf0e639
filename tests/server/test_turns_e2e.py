"""A multi-turn task run by a real agent framework: pydantic-ai with a scripted FunctionModel,
driven turn by turn by tracecard (`POST /api/runs/{id}/turns/next`, `TracecardClient.next_turn`)
against a real MCP server through the proxy. Turn spans in order parent their calls; each turn's
probes run at its boundary as verifier spans; scores come per turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.processes import mcp_tool_server
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.client import TracecardClient
from tracecard.server.settings import Settings
from tracecard.traces import semconv as sc

pytestmark = pytest.mark.slow

SUITE = """
schema_version = 2
name = "notes-turns"

[[tasks]]
id = "three-turns"
instruction = "You keep notes."
upstreams = ["notes"]

[[tasks.turns]]
user = "Save the note 'a' with the text 'one'."
invocation = { calls = [{ tool = "write_note", arguments = { key = "a", text = "one" } }] }
[tasks.turns.outcome]
probes = [{ id = "a", upstream = "notes", tool = "read_note", arguments = { key = "a" } }]
predicates = [{ probe = "a", path = "$.structuredContent.text", op = "eq", value = "one" }]

[[tasks.turns]]
user = "What's the weather like? No need to write anything."
invocation = { expect_no_calls = true }

[[tasks.turns]]
user = "Now save the note 'b' with the text 'two'."
[tasks.turns.invocation]
calls = [{ tool = "write_note", arguments = { key = "b" }, result = { exact = "stored b" } }]
[tasks.turns.outcome]
probes = [{ id = "b", upstream = "notes", tool = "read_note", arguments = { key = "b" } }]
predicates = [{ probe = "b", path = "$.structuredContent.text", op = "eq", value = "two" }]
"""

TASK = {"suite": "notes-turns", "task_id": "three-turns"}
Step = tuple[str, dict[str, Any]]
RIGHT: list[list[Step]] = [
    [("write_note", {"key": "a", "text": "one"})],
    [],
    [("write_note", {"key": "b", "text": "two"})],
]
LATE: list[list[Step]] = [RIGHT[0], RIGHT[2], []]  # turn 2's call made during turn 1


def create_run(server: RunningServer) -> dict[str, Any]:
    response = httpx.post(f"{server.url}/api/runs", json=TASK, timeout=30)
    assert response.status_code == 201, response.text
    run: dict[str, Any] = response.json()
    return run


def turn_model(steps: list[Step]) -> FunctionModel:
    """One turn's script: these tool calls, one per model response, then a short answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # responses since this turn's user message (the history holds the earlier turns)
        asked = max(
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
        )
        made = sum(1 for m in messages[asked:] if isinstance(m, ModelResponse))
        if made < len(steps):
            return ModelResponse(parts=[ToolCallPart(*steps[made])])
        return ModelResponse(parts=[TextPart("ok")])

    return FunctionModel(respond)


async def play(server: RunningServer, script: list[list[Step]]) -> tuple[dict[str, Any], list[Any]]:
    """Create a run, ask tracecard for each turn, run the agent on it, finish; the scores and
    spans of the run."""
    client = TracecardClient(server.url)
    try:
        run = await asyncio.to_thread(lambda: create_run(server))
        history: list[ModelMessage] = []
        handed: list[int] = []
        toolset = MCPToolset(run["urls"]["notes"], tool_error_behavior="failed")
        while True:
            turn = await asyncio.to_thread(client.next_turn, run["id"])
            if turn["done"]:
                break
            handed.append(turn["index"])
            agent = Agent(turn_model(script[turn["index"]]), toolsets=[toolset])
            async with agent:
                result = await agent.run(turn["user"], message_history=history)
            history = result.all_messages()
        assert handed == [0, 1, 2]
        finished = await asyncio.to_thread(client.finish_run, run["id"], final_answer="ok")
        spans = await asyncio.to_thread(
            lambda: httpx.get(f"{server.url}/api/runs/{run['id']}/spans").json()["spans"]
        )
    finally:
        client.close()
    return finished, spans


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("turns")
    with mcp_tool_server() as upstream:
        settings = Settings.model_validate(
            {
                "db": f"sqlite:///{folder / 'tracecard.db'}",
                "sandbox_root": str(folder / "sandboxes"),
                "upstreams": {"notes": {"url": upstream}},
                "recording": {"batch_delay_ms": 50},
            }
        )
        with running_tracecard(settings) as running, TracecardClient(running.url) as client:
            client.add_suite(SUITE)
            yield running


def score(finished: dict[str, Any], component: str) -> dict[str, Any]:
    return next(s for s in finished["scores"] if s["component"] == component)


async def test_turns_are_spans_in_order_with_probes_between_them(server: RunningServer) -> None:
    finished, spans = await play(server, RIGHT)
    turns = [s for s in spans if s["name"].startswith("turn ")]
    assert [t["name"] for t in turns] == ["turn 0", "turn 1", "turn 2"]
    assert [t["attributes"][sc.TURN_INDEX] for t in turns] == [0, 1, 2]
    by_id = {t["span_id"]: t["attributes"][sc.TURN_INDEX] for t in turns}
    agent_calls = [
        s
        for s in spans
        if s["attributes"].get(sc.ROLE) == sc.ROLE_AGENT and s["name"].startswith("tools/call")
    ]
    assert [by_id.get(c["parent_span_id"]) for c in agent_calls] == [0, 2]
    probes = [s for s in spans if s["attributes"].get(sc.PROBE_ID)]
    assert [(p["attributes"][sc.TURN_INDEX], p["attributes"][sc.PROBE_ID]) for p in probes] == [
        (0, "a"),
        (2, "b"),
    ]
    assert all(p["attributes"][sc.ROLE] == sc.ROLE_VERIFIER for p in probes)
    # turn 0's probe ran at its boundary: after its call, before turn 1 was handed out
    assert agent_calls[0]["end_time_unix_nano"] <= probes[0]["start_time_unix_nano"]
    assert probes[0]["end_time_unix_nano"] <= turns[1]["start_time_unix_nano"]
    assert by_id[probes[0]["parent_span_id"]] == 0
    invocation, outcome = score(finished, "invocation"), score(finished, "outcome")
    assert (invocation["value"], invocation["passed"]) == (1.0, True)
    assert [r["turn"] for r in invocation["evidence"]["turns"]] == [0, 1, 2]
    assert (outcome["value"], outcome["passed"]) == (1.0, True)


async def test_a_call_one_turn_late_fails_the_turns_it_moved_between(
    server: RunningServer,
) -> None:
    finished, _ = await play(server, LATE)
    invocation = score(finished, "invocation")
    assert [r["passed"] for r in invocation["evidence"]["turns"]] == [True, False, False]
    assert invocation["passed"] is False and invocation["value"] == pytest.approx(1 / 3)
    outcome = score(finished, "outcome")
    # The state after turn 2 is right (b was written, one turn early): outcome alone passes.
    assert outcome["passed"] is True


def test_turns_of_a_finished_run_are_refused(server: RunningServer) -> None:
    with TracecardClient(server.url) as client:
        run = create_run(server)
        client.finish_run(run["id"], status="aborted")
        with pytest.raises(Exception, match="already ended"):
            client.next_turn(run["id"])


async def test_the_trace_page_and_the_trials_comparison_show_turns(server: RunningServer) -> None:
    right, _ = await play(server, RIGHT)
    late, _ = await play(server, LATE)
    trace = httpx.get(f"{server.url}/runs/{right['id']}", timeout=30).text
    assert trace.count('class="chip turn"') == 3  # one per turn span, with its user message
    assert "Save the note &#39;a&#39; with the text &#39;one&#39;." in trace
    compare = httpx.get(
        f"{server.url}/compare/runs", params=[("run", right["id"]), ("run", late["id"])], timeout=30
    ).text
    # the same call made in turn 2 by one trial and in turn 1 by the other is a divergence
    row = compare[compare.index('id="divergence"') :].split("</tr>")[0]
    assert "turn 2</span>" in row and "turn 1</span>" in row
