"""Replay (docs/replay.md): a pydantic-ai agent runs live against the helpdesk MCP server and a
plain HTTP tool, then again with `replay` from that experiment: the servers receive nothing,
every span is marked recorded, every score is the source's. A perturbed agent is flagged
`replay_diverged` (the call named), and with `on_miss = "live"` completes live."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import Agent as OpenAIAgent
from agents import Runner
from agents.mcp import MCPServerStreamableHttp
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp.client.client import Client

from tests.support.replay_world import (
    DESK_SUITE,
    HELPDESK,
    SUITE,
    Counting,
    helpdesk_http,
    kb_http,
    run_agent,
)
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.client import AsyncTracecardClient, TracecardClient, TracecardError
from tracecard.server.cli.main import main as cli_main
from tracecard.server.settings import Settings

# a stdio helpdesk that notes each start: `sh -c STARTS <file> python server.py <sandbox>`
STARTS = 'echo start >> "$0"; exec "$@"'
DESK = [sys.executable, str(HELPDESK / "server.py")]


class World:
    def __init__(
        self, server: RunningServer, helpdesk: Counting, kb: Counting, starts: Path
    ) -> None:
        self.server, self.helpdesk, self.kb = server, helpdesk, kb
        self.starts = starts  # one line per stdio helpdesk process started
        self.suite = ""
        self.source = ""
        self.db = Path()

    def requests(self) -> int:
        return self.helpdesk.requests + self.kb.requests


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("replay")
    starts = folder / "starts.txt"
    with helpdesk_http(folder / "state") as (helpdesk_url, helpdesk):
        with kb_http() as (kb_url, kb):
            settings = Settings.model_validate(
                {
                    "db": f"sqlite:///{folder / 'tracecard.db'}",
                    "sandbox_root": str(folder / "sandboxes"),
                    "upstreams": {
                        "helpdesk": {"url": helpdesk_url},
                        "kb": {"url": kb_url, "kind": "http"},
                        "desk": {
                            "command": ["sh", "-c", STARTS, str(starts), *DESK, "{sandbox}"],
                            "per_run": True,
                            "fixture": str(HELPDESK / "fixture"),
                        },
                    },
                    "recording": {"batch_delay_ms": 20},
                }
            )
            with running_tracecard(settings) as server:
                world = World(server, helpdesk, kb, starts)
                world.db = folder / "tracecard.db"
                yield world


async def _run_all(
    world: World, replay: dict[str, Any] | None, trials: int, query: str = "dana"
) -> tuple[str, dict[str, dict[str, Any]]]:
    """Create an experiment, run the agent in each run, finish it; (id, finish by run id)."""
    async with AsyncTracecardClient(world.server.url) as client:
        experiment = await client.create_experiment(
            world.suite, {"name": "scripted"}, trials, replay=replay
        )
        finished = {}
        for run in experiment.runs:
            handle = {"task_id": run.task_id, "instruction": run.instruction, "urls": run.urls}
            answer, status = await run_agent(handle, query)
            finished[run.id] = await client.finish_run(run.id, final_answer=answer, status=status)
    return experiment.id, finished


def _scores(client: TracecardClient, experiment: str) -> dict[tuple[str, int], Any]:
    found = {}
    for run in client.get_experiment(experiment)["runs"]:
        view = client.get_run(run["id"])
        scores = {s["component"]: (s["value"], s["passed"]) for s in view["scores"]}
        found[(run["task_id"], run["trial"])] = scores
    return found


def _spans(world: World, run_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{world.server.url}/api/runs/{run_id}/spans", timeout=30)
    spans: list[dict[str, Any]] = response.json()["spans"]
    return spans


def _proxied(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans of messages that crossed the proxy (not the root, probes or turns)."""
    return [
        s
        for s in spans
        if ("mcp.method.name" in s["attributes"] or "http.request.method" in s["attributes"])
        and "tracecard.probe.id" not in s["attributes"]
    ]


async def test_source_runs_live(world: World) -> None:
    with TracecardClient(world.server.url) as client:
        world.suite = client.add_suite_text(SUITE, "toml")["version"]
    world.source, finished = await _run_all(world, None, trials=3)
    assert world.helpdesk.requests > 0 and world.kb.requests == 3
    assert all(f["status"] == "finished" for f in finished.values())


async def test_replay_sends_nothing_upstream_and_scores_the_same(world: World) -> None:
    before = world.requests()
    replayed, finished = await _run_all(world, {"source": world.source}, trials=3)
    assert world.requests() == before  # neither server saw a single request
    with TracecardClient(world.server.url) as client:
        source_scores, replay_scores = _scores(client, world.source), _scores(client, replayed)
        assert replay_scores == source_scores
        assert any(v == (1.0, True) for s in replay_scores.values() for v in s.values())
        for run_id, finish in finished.items():
            assert finish["replay"]["diverged"] is None and finish["replay"]["missed"] == 0
            assert "replay_diverged" not in finish["flags"]
            spans = _proxied(_spans(world, run_id))
            kinds = {s["attributes"].get("tracecard.replay") for s in spans}
            assert spans and kinds == {"recorded"}, kinds
            assert all(s["attributes"]["tracecard.replay.source_span_id"] for s in spans)
            roles = {s["attributes"]["tracecard.role"] for s in spans}
            assert roles == {"agent", "verifier"} or finish["task_id"] == "count"


async def test_a_changed_argument_is_a_miss_naming_the_call(world: World) -> None:
    before = world.requests()
    _id, finished = await _run_all(world, {"source": world.source}, 1, query="dana kim")
    assert world.requests() == before
    assign = next(f for f in finished.values() if f["task_id"] == "assign")
    diverged = assign["replay"]["diverged"]
    assert diverged["request"] == 'tools/call find_users {"arguments":{"query":"dana kim"}}'
    assert diverged["closest"] == 'tools/call find_users {"arguments":{"query":"dana"}}'
    assert "replay_diverged" in assign["flags"]
    count = next(f for f in finished.values() if f["task_id"] == "count")
    assert count["replay"]["diverged"] is None and "replay_diverged" not in count["flags"]
    spans = _spans(world, assign["id"])
    missed = [s for s in spans if s["attributes"].get("error.type") == "replay_miss"]
    assert [s["name"] for s in missed] == ["tools/call find_users"]
    assert missed[0]["attributes"]["tracecard.replay"] == "miss"


async def test_on_miss_live_forwards_the_unmatched_call(world: World) -> None:
    before = world.helpdesk.requests
    replay = {"source": world.source, "on_miss": "live"}
    _id, finished = await _run_all(world, replay, 1, query="dana kim")
    assign = next(f for f in finished.values() if f["task_id"] == "assign")
    assert assign["status"] == "finished", assign["final_answer"]
    assert world.helpdesk.requests > before
    assert "replay_diverged" in assign["flags"] and assign["replay"]["live"] == 1
    spans = _proxied(_spans(world, assign["id"]))
    live = [s["name"] for s in spans if s["attributes"].get("tracecard.replay") == "live"]
    assert live == ["tools/call find_users"]


def test_bad_replay_sources_are_one_line_errors(world: World) -> None:
    with TracecardClient(world.server.url) as client:
        other = client.add_suite_text(SUITE.replace("replay-world", "other-world"), "toml")
        cases = {
            "nope": (world.suite, 1, "no experiment 'nope'"),
            world.source: (other["version"], 1, "replay needs the same suite version"),
            f"{world.source}+": (world.suite, 5, "has no trial 3 of task"),
        }
        for source, (suite, trials, expected) in cases.items():
            with pytest.raises(TracecardError) as caught:
                client.create_experiment(
                    suite, {"name": "x"}, trials, replay={"source": source.rstrip("+")}
                )
            assert expected in caught.value.detail and "\n" not in caught.value.detail


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
            spans = _proxied(_spans(world, run.id))
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
    spans = _proxied(_spans(world, replay.runs[0].id))
    calls = [s for s in spans if s["attributes"]["mcp.method.name"] in ("tools/call", "tools/list")]
    assert {s["attributes"]["tracecard.role"] for s in calls} == {"agent", "verifier"}
    assert {s["attributes"].get("tracecard.replay") for s in calls} == {"recorded"}


def test_tracecard_run_refuses_a_bad_source_before_any_agent_starts(
    world: World, tmp_path: Path
) -> None:
    marker = tmp_path / "agent-ran"
    agent = f'{sys.executable} -c \'open("{marker}", "w")\''
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(SUITE)
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "tracecard"),
            "run",
            "--server",
            world.server.url,
            "--suite",
            str(suite_file),
            "--name",
            "x",
            "--agent",
            agent,
            "--replay-from",
            "no-such-experiment",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and not marker.exists()
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "no experiment 'no-such-experiment'" in errors[0], result.stderr


def _tracecard(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The `tracecard` command line, run in this process (no interpreter start per call)."""
    code = cli_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_a_cassette_replays_on_a_fresh_database_with_no_tool_servers(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "run.tccas"
    code, _out, err = _tracecard(
        capsys,
        "export",
        "--experiment",
        world.source,
        "--format",
        "cassette",
        "-o",
        str(cassette),
        "--db",
        str(world.db),
    )
    assert code == 0, err
    fresh = tmp_path / "fresh.db"
    code, out, err = _tracecard(capsys, "import", "cassette", str(cassette), "--db", str(fresh))
    assert code == 0 and world.source in out, err
    nowhere = "http://127.0.0.1:9"  # no tool server anywhere: every answer is the cassette's
    settings = Settings.model_validate(
        {
            "db": f"sqlite:///{fresh}",
            "sandbox_root": str(tmp_path / "sandboxes"),
            "upstreams": {
                "helpdesk": {"url": f"{nowhere}/mcp"},
                "kb": {"url": nowhere, "kind": "http"},
            },
            "recording": {"batch_delay_ms": 20},
        }
    )
    with running_tracecard(settings) as server:
        async with AsyncTracecardClient(server.url) as client:
            experiment = await client.create_experiment(
                world.suite, {"name": "from-cassette"}, 3, replay={"source": world.source}
            )
            for run in experiment.runs:
                handle = {"task_id": run.task_id, "instruction": run.instruction, "urls": run.urls}
                answer, status = await run_agent(handle)
                await client.finish_run(run.id, final_answer=answer, status=status)
        with TracecardClient(server.url) as client:
            replayed, source = _scores(client, experiment.id), _scores(client, world.source)
    assert replayed == source and len(replayed) == 6


def test_an_unknown_cassette_version_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "future.tccas"
    cassette.write_text('{"format": "tracecard-cassette", "version": 99}\n')
    target = str(tmp_path / "x.db")
    code, _out, err = _tracecard(capsys, "import", "cassette", str(cassette), "--db", target)
    errors = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(errors) == 1, err
    assert "cassette version 99; this tracecard reads version 1" in errors[0]


async def test_a_restarted_server_keeps_replaying_the_open_runs(world: World) -> None:
    """Runs created by one process and served by another (a restart, or a second replica)
    replay all the same: the index is rebuilt at startup, never left to go live."""
    with TracecardClient(world.server.url) as client:
        experiment = client.create_experiment(
            world.suite, {"name": "restart"}, 1, {"source": world.source}
        )
    run = next(r for r in experiment.runs if r.task_id == "count")
    before = world.helpdesk.requests
    with running_tracecard(world.server.settings) as other:
        async with Client(f"{other.url}/runs/{run.id}/mcp/helpdesk") as mcp:
            args = {"status": "open", "priority": "urgent"}
            result = await mcp.call_tool("list_tickets", args)
    assert world.helpdesk.requests == before
    assert not result.is_error and "T-" in result.content[0].text


async def _openai_agents_trial(url: str) -> str:
    model = ScriptedModel(
        [
            [function_call("list_tickets", {"status": "open", "priority": "urgent"}, call_id="c1")],
            [assistant_message("2")],
        ]
    )
    async with MCPServerStreamableHttp(params={"url": url}, name="helpdesk") as server:
        agent = OpenAIAgent(
            name="desk", instructions="Use tools.", model=model, mcp_servers=[server]
        )
        result = await Runner.run(agent, "How many open urgent tickets?")
    model.assert_complete()
    return str(result.final_output)


async def test_an_openai_agents_agent_replays_too(world: World) -> None:
    async with AsyncTracecardClient(world.server.url) as client:
        source = await client.create_experiment(world.suite, {"name": "openai-agents"}, 1)
        run = next(r for r in source.runs if r.task_id == "count")
        live = await client.finish_run(
            run.id, final_answer=await _openai_agents_trial(run.urls["helpdesk"])
        )
        replay = await client.create_experiment(
            world.suite, {"name": "openai-agents"}, 1, replay={"source": source.id}
        )
        run = next(r for r in replay.runs if r.task_id == "count")
        before = world.helpdesk.requests
        answer = await _openai_agents_trial(run.urls["helpdesk"])
        replayed = await client.finish_run(run.id, final_answer=answer)
    assert world.helpdesk.requests == before
    assert [(s["component"], s["value"]) for s in replayed["scores"]] == [
        (s["component"], s["value"]) for s in live["scores"]
    ]
    spans = _proxied(_spans(world, run.id))
    assert spans and {s["attributes"].get("tracecard.replay") for s in spans} == {"recorded"}


def test_a_plain_http_miss_is_a_599_or_goes_live(world: World) -> None:
    answers = {}
    for on_miss in ("error", "live"):
        with TracecardClient(world.server.url) as client:
            replay = {"source": world.source, "on_miss": on_miss}
            experiment = client.create_experiment(world.suite, {"name": "kb"}, 1, replay)
        run = next(r for r in experiment.runs if r.task_id == "assign")
        before = world.kb.requests
        recorded = httpx.post(f"{run.urls['kb']}lookup", json={"topic": "printer"}, timeout=30)
        other = httpx.post(f"{run.urls['kb']}lookup", json={"topic": "vpn"}, timeout=30)
        answers[on_miss] = (recorded, other, world.kb.requests - before)
    for recorded, _other, _sent in answers.values():
        assert recorded.status_code == 200 and recorded.json()["topic"] == "printer"
        assert recorded.headers["x-kb"] == "1"  # the recorded headers come back too
    missed, sent = answers["error"][1], answers["error"][2]
    assert missed.status_code == 599 and sent == 0
    assert missed.json()["reason"] == "replay_miss"
    assert (
        'closest recorded: POST /lookup {"arguments":{"topic":"printer"}}'
        in missed.json()["detail"]
    )
    live, sent = answers["live"][1], answers["live"][2]
    assert live.status_code == 200 and live.json()["topic"] == "vpn" and sent == 1
