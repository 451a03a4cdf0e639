"""Model replay (docs/replay.md, "Model answers"): real agent frameworks point at tracecard's
`/llm/` (a scripted upstream model built from the SDKs' types) and `/mcp/` (a real MCP server);
`--replay all` then answers both from the recording, `--replay model` the model only. The
upstreams count what they receive; the official SDKs read the same bytes under replay."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
import uvicorn
from agents import Agent as OpenAIAgent
from agents import OpenAIResponsesModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.servers.model_upstream import ModelUpstream, model_upstream
from tests.support.proxy import tracecard_for
from tests.support.replay_world import Counting
from tests.support.tracecard import RunningServer, bound_socket, port_of, serving
from tracecard.client import AsyncTracecardClient, TracecardClient
from tracecard.server.cli.main import main as cli_main
from tracecard.server.replay.plan import ReplayPlan
from tracecard.server.replay.source import check_plan
from tracecard.server.runs.service import RunError
from tracecard.server.settings import Settings

set_tracing_disabled(True)  # openai-agents would export its own traces to the internet

SUITE = """
schema_version = 1
name = "model-replay"

[[tasks]]
id = "chat"
instruction = "What is 2 + 40?"
upstreams = ["tools", "openai"]
[tasks.invocation]
calls = [{ tool = "add", arguments = { a = 2, b = 40 } }]
[tasks.completion]
checks = [{ contains = "42" }]

[[tasks]]
id = "stream"
instruction = "What is 2 + 40?"
upstreams = ["tools", "openai"]
[tasks.invocation]
calls = [{ tool = "add", arguments = { a = 2, b = 40 } }]
[tasks.completion]
checks = [{ contains = "42" }]
"""

BYTES_SUITE = """
schema_version = 1
name = "model-bytes"

[[tasks]]
id = "bytes"
instruction = "Say hi."
upstreams = ["openai", "claude"]
"""


class World:
    def __init__(self, server: RunningServer, model: ModelUpstream, tools: Counting) -> None:
        self.server, self.model, self.tools = server, model, tools
        self.suite = ""
        self.source = ""

    def counts(self) -> tuple[int, int]:
        return len(self.model.received), self.tools.requests


@contextlib.contextmanager
def _tool_server() -> Iterator[tuple[str, Counting]]:
    from tests.servers import tool_server

    counting = Counting(tool_server.server.streamable_http_app())
    sock = bound_socket()
    config = uvicorn.Config(counting, log_level="warning", lifespan="on")
    with serving(config, sock, "tools"):
        yield f"http://127.0.0.1:{port_of(sock)}/mcp", counting


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with model_upstream() as model, _tool_server() as (tools_url, tools):
        upstreams: dict[str, dict[str, Any]] = {
            "openai": {"url": f"{model.url}/v1", "kind": "openai"},
            "claude": {"url": model.url, "kind": "anthropic"},
            "tools": {"url": tools_url},
        }
        with tracecard_for(upstreams, tmp_path_factory.mktemp("model-replay")) as server:
            found = World(server, model, tools)
            with TracecardClient(server.url) as client:
                found.suite = client.add_suite_text(SUITE, "toml")["version"]
            yield found


async def _pydantic_ai(urls: dict[str, str]) -> str:
    """Chat Completions, whole answers."""
    provider = OpenAIProvider(base_url=urls["openai"], api_key="sk-agent")
    model = OpenAIChatModel("script-agent", provider=provider)
    agent = Agent(model, toolsets=[MCPToolset(urls["tools"])])
    async with agent:
        result = await agent.run("What is 2 + 40?")
    return result.output


async def _openai_agents(urls: dict[str, str]) -> str:
    """The Responses API, streamed."""
    client = openai.AsyncOpenAI(base_url=urls["openai"], api_key="sk-agent", max_retries=0)
    async with MCPServerStreamableHttp(params={"url": urls["tools"]}, name="tools") as mcp:
        agent = OpenAIAgent(
            name="calc",
            instructions="Use tools.",
            model=OpenAIResponsesModel(model="script-agent", openai_client=client),
            mcp_servers=[mcp],
        )
        streamed = Runner.run_streamed(agent, "What is 2 + 40?")
        async for _event in streamed.stream_events():
            pass
    await client.close()
    return str(streamed.final_output)


async def _experiment(world: World, replay: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """Both tasks, one trial each, each by its framework; (experiment id, finish by run id)."""
    async with AsyncTracecardClient(world.server.url) as client:
        experiment = await client.create_experiment(world.suite, {"name": "m"}, 1, replay=replay)
        finished = {}
        for run in experiment.runs:
            agent = _pydantic_ai if run.task_id == "chat" else _openai_agents
            answer = await agent(run.urls)
            finished[run.id] = await client.finish_run(run.id, final_answer=answer)
    return experiment.id, finished


def _scores(client: TracecardClient, experiment: str) -> dict[tuple[str, int], Any]:
    found = {}
    for run in client.get_experiment(experiment)["runs"]:
        scores = client.get_run(run["id"])["scores"]
        found[(run["task_id"], run["trial"])] = {
            s["component"]: (s["value"], s["passed"]) for s in scores
        }
    return found


def _marks(world: World, run_id: str) -> dict[str, set[Any]]:
    """`tracecard.replay` of the run's model spans and of its tool calls."""
    spans = httpx.get(f"{world.server.url}/api/runs/{run_id}/spans", timeout=30).json()["spans"]
    model = [s for s in spans if "gen_ai.provider.name" in s["attributes"]]
    tools = [s for s in spans if "mcp.method.name" in s["attributes"]]
    assert model and tools
    return {
        "model": {s["attributes"].get("tracecard.replay") for s in model},
        "tools": {s["attributes"].get("tracecard.replay") for s in tools},
    }


async def test_replay_all_and_model_send_nothing_to_the_model_and_score_the_same(
    world: World,
) -> None:
    world.source, finished = await _experiment(world, None)
    assert all(f["status"] == "finished" for f in finished.values())
    with TracecardClient(world.server.url) as client:
        source = _scores(client, world.source)
    assert all(s["invocation"] == (1.0, True) for s in source.values()), source
    assert all(s["completion"] == (1.0, True) for s in source.values()), source

    # all: nothing live, neither the model nor the tools see a request
    before = world.counts()
    replayed, finished = await _experiment(world, {"source": world.source, "mode": "all"})
    assert world.counts() == before
    for run_id, finish in finished.items():
        assert finish["replay"]["missed"] == 0 and finish["replay"]["diverged"] is None
        assert _marks(world, run_id) == {"model": {"recorded"}, "tools": {"recorded"}}
    # model: the recorded model, the live tools
    model_only, finished = await _experiment(world, {"source": world.source, "mode": "model"})
    after = world.counts()
    assert after[0] == before[0] and after[1] > before[1]
    for run_id in finished:
        assert _marks(world, run_id) == {"model": {"recorded"}, "tools": {None}}

    # a determinism check: all again (from the replay itself), and rescoring, change nothing
    again, _ = await _experiment(world, {"source": replayed, "mode": "all"})
    assert world.counts()[0] == after[0]
    with TracecardClient(world.server.url) as client:
        for run in client.get_experiment(replayed)["runs"]:
            rescored = httpx.post(f"{world.server.url}/api/runs/{run['id']}/rescore", timeout=60)
            assert rescored.status_code in (200, 201), rescored.text
        for experiment in (replayed, model_only, again):
            assert _scores(client, experiment) == source, experiment


async def test_a_different_prompt_misses_and_names_the_model_call(world: World) -> None:
    async with AsyncTracecardClient(world.server.url) as client:
        replay = {"source": world.source, "mode": "model", "trial": 0}
        experiment = await client.create_experiment(world.suite, {"name": "m"}, 1, replay=replay)
        run = next(r for r in experiment.runs if r.task_id == "chat")
        before = world.counts()[0]
        oai = openai.AsyncOpenAI(base_url=run.urls["openai"], api_key="sk-agent", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            await oai.chat.completions.create(
                model="script-agent", messages=[{"role": "user", "content": "What is 3 + 40?"}]
            )
        await oai.close()
        finish = await client.finish_run(run.id, final_answer="?")
    assert world.counts()[0] == before
    assert caught.value.status_code == 599
    assert orjson.loads(caught.value.response.content)["reason"] == "replay_miss"
    diverged = finish["replay"]["diverged"]
    assert diverged["request"].startswith("POST /chat/completions")
    assert "3 + 40" in diverged["request"] and "2 + 40" in diverged["closest"]
    assert diverged["differs_at"] == "$.arguments.messages[0].content"
    assert len(diverged["request"]) < 400  # a whole conversation is cut, the path says where
    assert "replay_diverged" in finish["flags"]


async def _calls(urls: dict[str, str]) -> list[bytes]:
    """What the official SDKs receive, byte for byte: Chat Completions, Responses and
    Messages, whole and streamed."""
    user = [{"role": "user", "content": "hi"}]
    oai = openai.AsyncOpenAI(base_url=urls["openai"], api_key="sk-agent", max_retries=0)
    claude = anthropic.AsyncAnthropic(base_url=urls["claude"], api_key="sk-ant", max_retries=0)
    received = []
    async with oai, claude:
        for stream in (False, True):
            requests = [
                oai.chat.completions.with_streaming_response.create(
                    model="script-tools", messages=user, stream=stream
                ),
                oai.responses.with_streaming_response.create(
                    model="script-text", input="hi", stream=stream
                ),
                claude.messages.with_streaming_response.create(
                    model="script-tools", max_tokens=64, messages=user, stream=stream
                ),
            ]
            for request in requests:
                async with request as response:
                    received.append(b"".join([c async for c in response.iter_bytes()]))
        message = await claude.messages.create(model="script-tools", max_tokens=64, messages=user)
        assert [b.type for b in message.content] == ["tool_use", "tool_use"]  # the SDK reads it
    return received


async def test_the_sdks_receive_the_recorded_bytes(world: World) -> None:
    async with AsyncTracecardClient(world.server.url) as client:
        suite = (await client.add_suite_text(BYTES_SUITE, "toml"))["version"]
        source = await client.create_experiment(suite, {"name": "bytes"}, 1)
        live = await _calls(source.runs[0].urls)
        await client.finish_run(source.runs[0].id)
        before = world.counts()[0]
        replay = {"source": source.id, "mode": "model"}
        replayed = await client.create_experiment(suite, {"name": "bytes"}, 1, replay=replay)
        again = await _calls(replayed.runs[0].urls)
        await client.finish_run(replayed.runs[0].id)
    assert world.counts()[0] == before
    assert again == live and all(live) and b"event: message_start" in live[5]
    spans = httpx.get(f"{world.server.url}/api/runs/{source.runs[0].id}/spans", timeout=30).json()[
        "spans"
    ]
    stored = [s["attributes"] for s in spans if "gen_ai.provider.name" in s["attributes"]]
    assert [a["tracecard.llm.response.stored"] for a in stored] == ["whole"] * 7
    events = [
        orjson.loads(a["tracecard.llm.response.events"])
        for a in stored
        if a["tracecard.llm.stream"]
    ]
    assert ["".join(e).encode() for e in events] == live[3:6]


def test_replay_model_needs_a_model_upstream(tmp_path: Path) -> None:
    settings = Settings(
        db=f"sqlite:///{tmp_path / 'x.db'}", upstreams={"tools": {"url": "http://127.0.0.1:9/mcp"}}
    )
    for mode in ("model", "all"):
        plan = ReplayPlan(source="x", mode=mode)
        with pytest.raises(RunError) as caught:
            check_plan(None, settings, plan, "v", 1)  # type: ignore[arg-type]  # refused first
        assert "configures no model upstream" in str(caught.value)
        assert "\n" not in str(caught.value)


async def test_a_cassette_replays_the_model_and_the_tools_with_neither_running(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CI with no tool server and no model: the source's cassette, imported into a fresh
    database, answers both (`--replay all`) and the scores are the source's."""
    db = world.server.settings.db.removeprefix("sqlite:///")
    cassette, fresh = tmp_path / "run.tccas", tmp_path / "fresh.db"
    out = ["export", "--experiment", world.source, "--format", "cassette", "-o", str(cassette)]
    assert cli_main([*out, "--db", db]) == 0
    assert cli_main(["import", "cassette", str(cassette), "--db", str(fresh)]) == 0
    capsys.readouterr()
    nowhere = "http://127.0.0.1:9"  # nothing listens: every answer is the cassette's
    upstreams = {
        "openai": {"url": f"{nowhere}/v1", "kind": "openai"},
        "claude": {"url": nowhere, "kind": "anthropic"},
        "tools": {"url": f"{nowhere}/mcp"},
    }
    with tracecard_for(upstreams, tmp_path, db=f"sqlite:///{fresh}") as server:
        offline = World(server, world.model, world.tools)
        offline.suite = world.suite
        replayed, finished = await _experiment(offline, {"source": world.source, "mode": "all"})
        assert all(f["replay"]["missed"] == 0 for f in finished.values())
        with TracecardClient(server.url) as client:
            assert _scores(client, replayed) == _scores(client, world.source)
