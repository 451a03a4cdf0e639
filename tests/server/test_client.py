"""TracecardClient against tracecard in process (the app as served, no socket), and the example of
docs/client.md run as written against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.examples.helpers import ROOT, code_blocks
from tests.support.in_process import InProcessTracecard, in_process_tracecard
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.client import TracecardClient, TracecardError
from tracecard.server.settings import Settings

SUITE = {
    "schema_version": 1,
    "name": "tiny",
    "tasks": [
        {"id": "greet", "instruction": "Say hi.", "completion": {"checks": [{"contains": "hi"}]}},
        {"id": "count", "instruction": "Count to 3.", "completion": {"checks": [{"number": 3}]}},
    ],
}


@pytest.fixture
def server(settings: Settings) -> Iterator[InProcessTracecard]:
    with in_process_tracecard(settings) as tracecard:
        yield tracecard


@pytest.fixture
def served(settings: Settings) -> Iterator[RunningServer]:
    """A real server, for the example script (a process of its own)."""
    with running_tracecard(settings) as running:
        yield running


def test_a_whole_experiment_through_the_client(server: InProcessTracecard, tmp_path: Path) -> None:
    suite_file = tmp_path / "tiny.json"
    suite_file.write_text(json.dumps(SUITE))
    with TracecardClient(server.url, transport=server.transport) as tc:
        assert tc.health()["status"] == "ok"
        stored = tc.add_suite(str(suite_file))
        assert stored["name"] == "tiny" and stored["tasks"] == ["greet", "count"]
        assert tc.add_suite(suite_file)["version"] == stored["version"]  # same content, once
        experiment = tc.create_experiment("tiny", {"name": "mine", "model": "m"}, trials=2)
        assert len(experiment.runs) == 4 and experiment.config == {"name": "mine", "model": "m"}
        assert {r.instruction for r in experiment.runs} == {"Say hi.", "Count to 3."}
        for run in experiment.runs:
            if run.trial == 0:
                finished = tc.finish_run(run.id, final_answer="hi, 1 2 3")
                assert finished["status"] == "finished" and finished["scores"]
            else:
                tc.finish_run(run.id, status="errored", error="exit code 1: boom")
        assert tc.get_run(experiment.runs[0].id)["status"] == "finished"
        assert len(tc.get_experiment(experiment.id)["runs"]) == 4
        card = tc.scorecard(experiment.id)
        assert card["experiment"]["id"] == experiment.id and len(card["runs"]) == 4
        assert "| completion |" in tc.scorecard(experiment.id, "md")
        csv_rows = tc.scorecard(experiment.id, "csv").splitlines()
        assert csv_rows[0].startswith("experiment_id,config,suite") and len(csv_rows) > 4
        assert tc.scorecard(experiment.id, "xml").lstrip().startswith("<?xml")
        other = tc.create_experiment("tiny", {"name": "other"}, trials=2)
        for run in other.runs:
            tc.finish_run(run.id, final_answer="hi, 1 2 3")
        comparison = tc.compare(experiment.id, other.id, "completion")
        assert comparison["verdict"] == "undecided" and comparison["a"] == experiment.id
        assert tc.viewer_url(experiment.id) == f"{server.url}/experiments/{experiment.id}"


def test_errors_carry_the_servers_reason(server: InProcessTracecard) -> None:
    with TracecardClient(server.url, transport=server.transport) as tc:
        with pytest.raises(TracecardError) as missing:
            tc.create_experiment("no-such-suite", {"name": "x"})
        assert missing.value.status_code == 404 and "no-such-suite" in missing.value.detail
        with pytest.raises(ValueError, match="needs a name"):
            tc.create_experiment("tiny", {"model": "x"})
        tc.add_suite(json.dumps(SUITE))
        run = tc.create_experiment("tiny", {"name": "x"}).runs[0]
        tc.finish_run(run.id, final_answer="hi")
        with pytest.raises(TracecardError) as twice:
            tc.finish_run(run.id, final_answer="hi")
        assert twice.value.status_code == 409
    with TracecardClient("http://127.0.0.1:9", timeout=2) as unreachable:
        with pytest.raises(TracecardError) as down:
            unreachable.health()
        assert down.value.status_code == 0 and "cannot reach" in down.value.detail


def test_finish_sends_the_reason() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        return httpx.Response(200, json={"id": "r", "status": body["status"], "scores": []})

    with TracecardClient("http://tc", transport=httpx.MockTransport(handler)) as tc:
        assert tc.finish_run("r", status="errored", error="boom")["status"] == "errored"
        tc.finish_run("r2", final_answer="42")
    assert seen == [
        {"status": "errored", "error": "boom"},
        {"status": "finished", "final_answer": "42"},
    ]


def test_docs_client_example_runs_as_written(served: RunningServer, tmp_path: Path) -> None:
    (example,) = code_blocks(ROOT / "docs" / "client.md", "python")
    script = tmp_path / "harness.py"
    script.write_text(example)
    result = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "TRACECARD_URL": served.url, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("careful: completion pass_rate 1.00 -> http://")
    assert lines[1].startswith("sloppy: completion pass_rate 0.50 -> http://")
    assert lines[2].startswith("verdict: A better")
    assert "Scorecard: arithmetic · sloppy" in result.stdout


def test_path_and_text_are_explicit(server: InProcessTracecard, tmp_path: Path) -> None:
    # #14.12: a mistyped path is an error, never "TOML text"
    with TracecardClient(server.url, transport=server.transport) as tc:
        with pytest.raises(FileNotFoundError, match="suites/typo.toml: no such suite file"):
            tc.add_suite("suites/typo.toml")
        with pytest.raises(FileNotFoundError, match="no such suite file"):
            tc.add_suite_file(tmp_path / "missing.json")
        assert tc.add_suite_text(json.dumps(SUITE))["name"] == "tiny"
        toml = 'schema_version = 1\nname = "t2"\n[[tasks]]\nid = "a"\ninstruction = "x"\n'
        assert tc.add_suite_text(toml, "toml")["name"] == "t2"
        (tmp_path / "s.json").write_text(json.dumps(SUITE))
        assert tc.add_suite_file(str(tmp_path / "s.json"))["tasks"] == ["greet", "count"]
        # #14.11: a bad suite file is named as given, at the line, as `suite check` says it
        (tmp_path / "bad.toml").write_text(toml + '[[tasks]]\nid = "b"\n')
        with pytest.raises(TracecardError) as bad:
            tc.add_suite_file(tmp_path / "bad.toml")
        assert bad.value.status_code == 422
        assert bad.value.detail == f"{tmp_path / 'bad.toml'}:6: tasks[1].instruction: " + (
            "required field is missing"
        )
        with pytest.raises(TracecardError, match="^tracecard answered 422: request body:6: "):
            tc.add_suite_text(toml + '[[tasks]]\nid = "b"\n')  # text has no path to name


def test_an_unreachable_server_says_so(tmp_path: Path) -> None:
    from tracecard.client import TracecardConnectionError

    with TracecardClient("http://127.0.0.1:9", timeout=2) as tc:
        with pytest.raises(TracecardConnectionError) as down:
            tc.health()
    message = str(down.value)
    assert message.startswith("cannot reach tracecard at http://127.0.0.1:9: ")
    assert "tracecard serve" in message and "answered 0" not in message


def test_list_experiments_follows_the_pages(
    server: InProcessTracecard, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracecard.client

    monkeypatch.setattr(tracecard.client, "PAGE_SIZE", 2)
    with TracecardClient(server.url, transport=server.transport) as tc:
        tc.add_suite_text(json.dumps(SUITE))
        made = [tc.create_experiment("tiny", {"name": f"c{i}"}).id for i in range(5)]
        listed = tc.list_experiments()
        assert sorted(e["id"] for e in listed) == sorted(made) and len(listed) == 5
        assert {e["config"]["name"] for e in listed} == {f"c{i}" for i in range(5)}
        assert tc.list_experiments(suite="tiny")[0]["suite"] == "tiny"
        assert tc.list_experiments(suite="other") == []
    http = server.client
    page = http.get("/api/experiments", params={"limit": 2}).json()
    assert len(page["experiments"]) == 2 and page["next_offset"] == 2
    last = http.get("/api/experiments", params={"offset": 4, "limit": 2}).json()
    assert len(last["experiments"]) == 1 and last["next_offset"] is None
    assert http.get("/api/experiments", params={"limit": 0}).status_code == 400


async def test_the_async_client_does_the_same(server: InProcessTracecard) -> None:
    from tracecard import AsyncTracecardClient

    async with AsyncTracecardClient(server.url, transport=server.transport) as tc:
        assert (await tc.health())["status"] == "ok"
        await tc.add_suite_text(json.dumps(SUITE))
        experiment = await tc.create_experiment("tiny", {"name": "async"}, trials=1)
        for run in experiment.runs:
            await tc.finish_run(run.id, final_answer="hi, 1 2 3")
        card = await tc.scorecard(experiment.id)
        assert card["experiment"]["id"] == experiment.id
        assert any(e["id"] == experiment.id for e in await tc.list_experiments())
        assert (await tc.compare(experiment.id, experiment.id, "completion"))["verdict"]
