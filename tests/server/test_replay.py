"""Replay (docs/replay.md): a pydantic-ai agent runs live against the helpdesk MCP server and a
plain HTTP tool, then again with `replay` from that experiment: the servers receive nothing,
every span is marked recorded, every score is the source's. A perturbed agent is flagged
`replay_diverged` (the call named), and with `on_miss = "live"` completes live. Bad sources and
cassettes are one-line errors; a cassette replays on a fresh database; a restart keeps replaying.
(The protocols one by one: test_replay_protocols.py; the model side: test_replay_model.py.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from tests.support.replay_world import (
    SUITE,
    World,
    open_world,
    proxied,
    run_agent,
    run_all,
    scores_of,
    spans_of,
)
from tests.support.tracecard import running_tracecard
from tracecard.client import AsyncTracecardClient, TracecardClient, TracecardError
from tracecard.server.cli.main import main as cli_main
from tracecard.server.settings import Settings


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with open_world(tmp_path_factory.mktemp("replay")) as found:
        yield found


async def test_source_runs_live(world: World) -> None:
    world.source, finished = await run_all(world, None, trials=3)
    assert world.helpdesk.requests > 0 and world.kb.requests == 3
    assert all(f["status"] == "finished" for f in finished.values())


async def test_replay_sends_nothing_upstream_and_scores_the_same(world: World) -> None:
    before = world.requests()
    replayed, finished = await run_all(world, {"source": world.source}, trials=3)
    assert world.requests() == before  # neither server saw a single request
    with TracecardClient(world.server.url) as client:
        source_scores, replay_scores = scores_of(client, world.source), scores_of(client, replayed)
        assert replay_scores == source_scores
        assert any(v == (1.0, True) for s in replay_scores.values() for v in s.values())
        for run_id, finish in finished.items():
            assert finish["replay"]["diverged"] is None and finish["replay"]["missed"] == 0
            assert "replay_diverged" not in finish["flags"]
            spans = proxied(spans_of(world, run_id))
            kinds = {s["attributes"].get("tracecard.replay") for s in spans}
            assert spans and kinds == {"recorded"}, kinds
            assert all(s["attributes"]["tracecard.replay.source_span_id"] for s in spans)
            roles = {s["attributes"]["tracecard.role"] for s in spans}
            assert roles == {"agent", "verifier"} or finish["task_id"] == "count"


async def test_a_changed_argument_is_a_miss_naming_the_call(world: World) -> None:
    before = world.requests()
    _id, finished = await run_all(world, {"source": world.source}, 1, query="dana kim")
    assert world.requests() == before
    assign = next(f for f in finished.values() if f["task_id"] == "assign")
    diverged = assign["replay"]["diverged"]
    assert diverged["request"] == 'tools/call find_users {"arguments":{"query":"dana kim"}}'
    assert diverged["closest"] == 'tools/call find_users {"arguments":{"query":"dana"}}'
    assert "replay_diverged" in assign["flags"]
    count = next(f for f in finished.values() if f["task_id"] == "count")
    assert count["replay"]["diverged"] is None and "replay_diverged" not in count["flags"]
    spans = spans_of(world, assign["id"])
    missed = [s for s in spans if s["attributes"].get("error.type") == "replay_miss"]
    assert [s["name"] for s in missed] == ["tools/call find_users"]
    assert missed[0]["attributes"]["tracecard.replay"] == "miss"


async def test_on_miss_live_forwards_the_unmatched_call(world: World) -> None:
    before = world.helpdesk.requests
    replay = {"source": world.source, "on_miss": "live"}
    _id, finished = await run_all(world, replay, 1, query="dana kim")
    assign = next(f for f in finished.values() if f["task_id"] == "assign")
    assert assign["status"] == "finished", assign["final_answer"]
    assert world.helpdesk.requests > before
    assert "replay_diverged" in assign["flags"] and assign["replay"]["live"] == 1
    spans = proxied(spans_of(world, assign["id"]))
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


def _tracecard(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The `tracecard` command line, run in this process (no interpreter start per call)."""
    code = cli_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _export(capsys: pytest.CaptureFixture[str], experiment: str, db: str, to: Path) -> None:
    args = ("export", "--experiment", experiment, "--format", "cassette", "-o", str(to))
    code, _out, err = _tracecard(capsys, *args, "--db", db)
    assert code == 0, err


async def _replay_cassette(
    capsys: pytest.CaptureFixture[str],
    world: World,
    cassette: Path,
    db: str,
    source: str,
    trials: int,
) -> str:
    """Import `cassette` into the empty database `db`, replay `source` there from a tracecard
    whose upstreams are a closed port, with the real agent; the replayed experiment's id."""
    code, out, err = _tracecard(capsys, "import", "cassette", str(cassette), "--db", db)
    assert code == 0 and source in out, err
    nowhere = "http://127.0.0.1:9"  # no tool server anywhere: every answer is the cassette's
    settings = Settings.model_validate(
        {
            "db": db,
            "sandbox_root": str(cassette.parent / "sandboxes"),
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
                world.suite, {"name": "from-cassette"}, trials, replay={"source": source}
            )
            for run in experiment.runs:
                handle = {"task_id": run.task_id, "instruction": run.instruction, "urls": run.urls}
                answer, status = await run_agent(handle)
                await client.finish_run(run.id, final_answer=answer, status=status)
        with TracecardClient(server.url) as client:
            replayed, recorded = scores_of(client, experiment.id), scores_of(client, source)
    assert replayed == {k: v for k, v in recorded.items() if k[1] < trials}
    assert len(replayed) == 2 * trials and any(v for s in replayed.values() for v in s.values())
    return experiment.id


async def test_a_cassette_replays_on_a_fresh_database_with_no_tool_servers(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "run.tccas"
    _export(capsys, world.source, str(world.db), cassette)
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    await _replay_cassette(capsys, world, cassette, fresh, world.source, trials=3)


@pytest.mark.postgres
async def test_a_cassette_crosses_from_sqlite_to_postgresql_and_back(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    """Recorded on SQLite, replayed on PostgreSQL with the source's scores; that replay,
    exported from PostgreSQL, replays on a fresh SQLite with the same scores again."""
    there = tmp_path / "sqlite-to-pg.tccas"
    _export(capsys, world.source, str(world.db), there)
    on_pg = await _replay_cassette(capsys, world, there, pg_url, world.source, trials=1)
    back = tmp_path / "pg-to-sqlite.tccas"
    _export(capsys, on_pg, pg_url, back)
    fresh = f"sqlite:///{tmp_path / 'back.db'}"
    await _replay_cassette(capsys, world, back, fresh, on_pg, trials=1)


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


async def test_a_fault_plan_over_a_replay_breaks_the_recorded_answers(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replay and faults in one experiment: a replacing fault answers instead of the recording
    (whose answer then waits for a retry), a changing fault changes the recorded answer; no
    upstream sees a request, and the robustness report counts the faults as for a live run."""
    faults = {
        "seed": 7,
        "rules": [
            {"kind": "tool_error", "upstream": "helpdesk", "tool": "find_users", "nth": 1},
            {"kind": "corrupt", "upstream": "helpdesk", "tool": "list_tickets"},
            {"kind": "truncate", "upstream": "kb", "keep": 8},
        ],
    }
    before = world.requests()
    experiment, finished = await run_all(world, {"source": world.source}, 1, faults=faults)
    assert world.requests() == before
    agent: dict[str, dict[str, Any]] = {}
    for finish in finished.values():
        assert finish["replay"]["missed"] == 0, finish["replay"]
        for span in proxied(spans_of(world, finish["id"])):
            if span["attributes"]["tracecard.role"] == "agent":
                agent[span["name"]] = span["attributes"]
    find, tickets = agent["tools/call find_users"], agent["tools/call list_tickets"]
    kb = agent["POST /lookup"]
    assert find["tracecard.fault.kind"] == "tool_error" and "tracecard.replay" not in find
    assert find["error.type"] == "tool_error"
    assert (
        tickets["tracecard.fault.kind"] == "corrupt" and tickets["tracecard.replay"] == "recorded"
    )
    assert '"unexpected"' in tickets["gen_ai.tool.call.result"]
    assert kb["tracecard.fault.kind"] == "truncate" and kb["tracecard.replay"] == "recorded"
    assert kb["tracecard.response.body"] == '{"topic"'  # the recorded body, cut to 8 bytes
    assert agent["tools/call update_ticket"]["tracecard.replay"] == "recorded"
    with TracecardClient(world.server.url) as client:
        assert set(client.get_experiment(experiment)["environment"]) == {"replay", "faults"}
        kinds = {k["kind"]: k["faulted_calls"] for k in client.robustness(experiment)["kinds"]}
    assert kinds == {"tool_error": 1, "corrupt": 1, "truncate": 1}
    # the scorecard's robustness section (JSON, Markdown) and tracecard compare say the same
    base = f"{world.server.url}/api/experiments/{experiment}"
    section = httpx.get(f"{base}/scorecard.json", timeout=30).json()["robustness"]
    assert section["replay"]["source"] == world.source and section["replay"]["missed"] == 0
    assert section["replay"]["recorded"] > 0 and section["faults"]["seed"] == 7
    assert {k["kind"]: k["recovered_runs"] for k in section["kinds"]} == {
        "corrupt": 0,
        "tool_error": 0,
        "truncate": 0,
    }
    line = "after tool_error the agent recovered in 0/1 trials (0/1 faulted calls)"
    assert line in httpx.get(f"{base}/scorecard.md", timeout=30).text
    source_card = httpx.get(
        f"{world.server.url}/api/experiments/{world.source}/scorecard.json", timeout=30
    ).json()
    assert "robustness" not in source_card  # a plain experiment's scorecard is as it was
    page = httpx.get(f"{world.server.url}/runs/{next(iter(finished))}", timeout=30).text
    assert f'href="/experiments/{world.source}"' in page and ">replayed · tools</a>" in page
    assert ">faults · seed 7 · 3 rules</span>" in page  # the trace page's chips
    with TracecardClient(world.server.url) as client:
        plain_run = client.get_experiment(world.source)["runs"][0]["id"]
    plain = httpx.get(f"{world.server.url}/runs/{plain_run}", timeout=30).text
    assert "env-replay" not in plain and "env-faults" not in plain
    code, out, err = _tracecard(capsys, "compare", world.source, experiment, "--db", str(world.db))
    assert code == 0, err
    robust = [x for x in out.splitlines() if x.startswith("B scripted")]
    assert any(x.endswith(f": {line}") for x in robust), out
    assert any(f": replayed from {world.source} (tools)" in x for x in robust), out
    assert not any(x.startswith("A ") and "recovered" in x for x in out.splitlines())


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
