"""BFCL's `multi_turn_miss_func` through a real tracecard: a function held back until a later
turn, revealed by the per-run BFCL server when tracecard's turn notice says that turn began, and
announced with `notifications/tools/list_changed` on the stateless clients' `subscriptions/listen`
streams of that run's process (the stdio bridge).

`multi_turn_miss_func_50` holds `lockDoors` back until turn 1, which has no question of its own;
turn 0 asks for what needs it and expects no call. A pydantic-ai `MCPToolset` (stateless, with a
listen stream on its own session) re-lists after the notification and calls `lockDoors`; an
openai-agents agent without the tools cache (the example agent) lists it at its next run; the
replay agent replays the ground truth in another run, whose listen stream hears its own run's
change and not the other's.
"""

from __future__ import annotations

import asyncio
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp.client.client import Client
from mcp.client.subscriptions import ToolsListChanged, listen
from mcp.shared.exceptions import MCPError
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.bfcl import bfcl_tracecard
from tests.support.tracecard import RunningServer
from tracecard.client import TracecardClient
from tracecard.server.bfcl.agreement import bfcl_verdict, simulated_spans, tracecard_verdict
from tracecard.server.bfcl.importer import import_suite, upstream_config
from tracecard.server.bfcl.mcp_server import STATE_TOOL, build_server, find_entry
from tracecard.server.bfcl.miss_func import TURN_TOOL
from tracecard.server.bfcl.trajectories import ground_truth

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "agents"))
from bfcl_openai_agents import play  # noqa: E402
from bfcl_replay import replay  # noqa: E402

pytestmark = pytest.mark.slow

ENTRY = "multi_turn_miss_func_50"
BASE = "multi_turn_base_0"  # its server announces no list changes
SUITE = import_suite(
    ["multi_turn_miss_func", "multi_turn_base"], ids=[ENTRY, BASE], name="bfcl-miss-func"
)
TRUTH = ground_truth(ENTRY)
REVEALED = "lockDoors"
# pinned, not probed: under heavy load a probe that times out falls back to the session protocol
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with bfcl_tracecard(tmp_path_factory.mktemp("bfcl-miss-func"), SUITE) as running:
        yield running


def new_run(server: RunningServer, entry: str = ENTRY) -> dict[str, Any]:
    created = httpx.post(
        f"{server.url}/api/runs",
        json={"suite": SUITE.name, "task_id": entry, "config": {"name": "miss-func"}},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    return dict(created.json())


def passed(finished: dict[str, Any]) -> dict[str, bool]:
    return {s["component"]: s["passed"] for s in finished["scores"]}


def test_the_revealing_turn_carries_bfcls_own_message() -> None:
    prompts = __import__("bfcl_eval.constants.default_prompts", fromlist=["_"])
    turns = SUITE.task(ENTRY).turns
    assert turns[1].user == prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    assert turns[0].invocation is not None and turns[0].invocation.expect_no_calls
    assert turns[1].invocation is not None
    assert [c.tool for c in turns[1].invocation.calls] == [REVEALED, "setHeadlights"]
    assert SUITE.task(ENTRY).metadata["bfcl_missed_function"] == {"1": [REVEALED]}
    bfcl = tomllib.loads(upstream_config())["upstreams"]["bfcl"]
    assert bfcl["turn_tool"] == TURN_TOOL and TURN_TOOL in bfcl["verifier_tools"]


async def test_the_server_lists_the_function_only_from_its_turn() -> None:
    async with Client(build_server(find_entry(ENTRY))) as client:  # the server, in process
        assert REVEALED not in {t.name for t in (await client.list_tools()).tools}
        bad = await client.call_tool(TURN_TOOL, {"turn": -1})
        assert bad.is_error and "non-negative integer" in str(bad.content)
        told = await client.call_tool(TURN_TOOL, {"turn": 1})
        assert f"revealed {REVEALED}" in str(told.content)
        assert REVEALED in {t.name for t in (await client.list_tools()).tools}
        again = await client.call_tool(TURN_TOOL, {"turn": 1})  # nothing new: no notification
        assert "revealed" not in str(again.content)
    # called before its turn, it is executed, as BFCL's executor would, and fails as BFCL says
    early = [TRUTH[1], []]
    assert bfcl_verdict(ENTRY, early).valid is False
    task = SUITE.task(ENTRY)
    assert tracecard_verdict(task, simulated_spans(task, ENTRY, early))[0] is False
    entry_49 = "multi_turn_miss_func_49"  # its ground truth calls `tail` before the reveal
    truth_49 = ground_truth(entry_49)
    assert bfcl_verdict(entry_49, truth_49).valid is True
    imported = import_suite(["multi_turn_miss_func"], ids=[entry_49]).task(entry_49)
    assert tracecard_verdict(imported, simulated_spans(imported, entry_49, truth_49))[0] is True


async def test_suite_check_knows_the_function_a_later_turn_reveals() -> None:
    from tracecard.server.evaluation.tool_lists import check_suite_tools
    from tracecard.server.settings import Settings

    settings = Settings.model_validate({"upstreams": tomllib.loads(upstream_config())["upstreams"]})
    one = SUITE.model_copy(update={"tasks": [SUITE.task(ENTRY)]})
    findings, listings = await check_suite_tools(settings, one)
    assert not [f.message for f in findings if f.level == "error"]
    assert REVEALED in (listings.names()["bfcl"] or [])  # told turn 1, it listed lockDoors


class _Scripted:
    """pydantic-ai's FunctionModel: in turn `turn`, the ground truth's calls one at a time."""

    def __init__(self) -> None:
        self.turn = 0
        self.made = 0
        self.offered: dict[int, set[str]] = {}

    def next_turn(self, index: int) -> None:
        self.turn, self.made = index, 0

    def respond(self, _messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.setdefault(self.turn, {t.name for t in info.function_tools})
        calls = TRUTH[self.turn]
        if self.made >= len(calls):
            return ModelResponse(parts=[TextPart(f"turn {self.turn} done")])
        call = calls[self.made]
        self.made += 1
        return ModelResponse(parts=[ToolCallPart(call["tool"], call["arguments"])])


async def test_a_pydantic_ai_toolset_relists_after_list_changed_and_calls_the_revealed_tool(
    server: RunningServer,
) -> None:
    run, other = new_run(server), new_run(server)
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:  # runs after pydantic-ai's own cache drop
        if isinstance(getattr(message, "root", message), mcp_types.ToolListChangedNotification):
            changed.set()

    scripted = _Scripted()
    # the run's BFCL server starts for the first request: allow for its start-up (docs/agents.md)
    toolset = MCPToolset(
        run["urls"]["bfcl"], message_handler=on_message, init_timeout=60, read_timeout=60
    )
    agent = Agent(FunctionModel(scripted.respond), toolsets=[toolset])
    async with (
        Client(other["urls"]["bfcl"], mode=MODERN) as bystander,
        listen(bystander.session, tools_list_changed=True) as elsewhere,
        agent,
    ):
        session = toolset.client.session
        assert session.protocol_version == "2026-07-28"
        async with listen(session, tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed is True
            with TracecardClient(server.url) as tracecard:
                history = None
                while not (turn := await asyncio.to_thread(tracecard.next_turn, run["id"]))["done"]:
                    if turn["index"] == 1:  # revealed before the turn's message was handed out
                        await asyncio.wait_for(changed.wait(), 60)
                    scripted.next_turn(turn["index"])
                    result = await agent.run(turn["user"], message_history=history)
                    history = result.all_messages()
                finished = tracecard.finish_run(run["id"], final_answer="done")
            # the run's end closes its listen stream gracefully: the loop ends, nothing is lost
            events = [event async for event in subscription]
        assert events == [ToolsListChanged()]
        # the other run's process has changed nothing yet: its listen stream heard nothing (a
        # relay to every listener would have queued this run's change there long ago)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await anext(elsewhere)
        # the replay agent plays the other run; its listen stream hears that run's own change
        with TracecardClient(server.url) as tracecard:
            handed = await replay(tracecard, other["id"], ENTRY, other["urls"]["bfcl"])
            replayed = await asyncio.to_thread(
                lambda: tracecard.finish_run(other["id"], final_answer="done")
            )
        assert [event async for event in elsewhere] == [ToolsListChanged()]
    assert handed == [0, 1]
    assert passed(replayed)["invocation"] is True and passed(replayed)["outcome"] is True
    assert REVEALED not in scripted.offered[0] and REVEALED in scripted.offered[1]
    assert not {STATE_TOOL, TURN_TOOL} & set().union(*scripted.offered.values())
    assert passed(finished)["invocation"] is True and passed(finished)["outcome"] is True
    spans = httpx.get(f"{server.url}/api/runs/{run['id']}/spans", timeout=30).json()["spans"]
    listens = [s for s in spans if s["name"] == "subscriptions/listen"]
    assert [s["attributes"]["tracecard.listen.end"] for s in listens] == ["run_finished"]
    assert [e["name"] for e in listens[0]["events"]] == ["notifications/tools/list_changed"]
    notices = [s for s in spans if s["name"] == "turn notice"]
    assert [s["attributes"]["tracecard.turn.index"] for s in notices] == [1]
    agent_lists = [
        s
        for s in spans
        if s["name"] == "tools/list" and s["attributes"]["tracecard.role"] == "agent"
    ]
    assert len(agent_lists) == 2  # once, and once more after the notification


def test_an_openai_agents_agent_without_the_cache_lists_the_revealed_tool_at_its_next_run(
    server: RunningServer,
) -> None:
    steps: list[Any] = []
    for index, calls in enumerate(TRUTH):  # one call per step: BFCL's calls are ordered
        for n, call in enumerate(calls):
            steps.append([function_call(call["tool"], call["arguments"], call_id=f"t{index}c{n}")])
        steps.append([assistant_message(f"turn {index} done")])
    model = ScriptedModel(steps)
    run = new_run(server)
    with TracecardClient(server.url) as tracecard:
        handed, _ = asyncio.run(play(tracecard, run["id"], run["urls"]["bfcl"], model))
        finished = tracecard.finish_run(run["id"], final_answer="done")
    model.assert_complete()
    assert handed == [0, 1]
    first_of_turn = [
        {t.name for t in call.tools} for call in model.calls if call.input[-1].get("role") == "user"
    ]
    assert [REVEALED in tools for tools in first_of_turn] == [False, True]
    assert passed(finished)["invocation"] is True and passed(finished)["outcome"] is True


async def test_a_listen_to_a_server_that_announces_no_changes_gets_its_own_error(
    server: RunningServer,
) -> None:
    run = new_run(server, BASE)
    async with Client(run["urls"]["bfcl"], mode=MODERN) as client:
        with pytest.raises(MCPError) as raised:
            async with listen(client.session, tools_list_changed=True):
                pass
    assert raised.value.error.code == -32601  # the SDK server's own "Method not found"
