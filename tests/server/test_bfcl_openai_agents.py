"""The openai-agents example agent (examples/agents/bfcl_openai_agents.py) on a BFCL multi-turn
task through a real tracecard: openai-agents' `ScriptedModel` stands in for the model and makes
the ground truth's calls turn by turn. Turns come from tracecard, the calls go through the run's
per-run BFCL server and are recorded in their turns, and the run is scored per turn; a model that
gets one argument wrong fails where BFCL would."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from tests.support.bfcl import bfcl_tracecard
from tests.support.tracecard import RunningServer
from tracecard.client import TracecardClient
from tracecard.server.bfcl.agreement import bfcl_verdict
from tracecard.server.bfcl.importer import import_suite
from tracecard.server.bfcl.mcp_server import STATE_TOOL
from tracecard.server.bfcl.trajectories import Trajectory, ground_truth, perturb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "agents"))
from bfcl_openai_agents import play  # noqa: E402

pytestmark = pytest.mark.slow

ENTRY = "multi_turn_base_0"
SUITE = import_suite(["multi_turn_base"], ids=[ENTRY], name="bfcl-openai-agents")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with bfcl_tracecard(tmp_path_factory.mktemp("bfcl-openai-agents"), SUITE) as running:
        yield running


def scripted(trajectory: Trajectory) -> ScriptedModel:
    """A model that, in each user turn, makes that turn's calls at once and then answers."""
    steps: list[Any] = []
    for index, calls in enumerate(trajectory):
        if calls:
            steps.append(
                [
                    function_call(c["tool"], c["arguments"], call_id=f"t{index}c{n}")
                    for n, c in enumerate(calls)
                ]
            )
        steps.append([assistant_message(f"turn {index} done")])
    return ScriptedModel(steps)


def run_with(server: RunningServer, model: ScriptedModel) -> tuple[dict[str, Any], list[int]]:
    with TracecardClient(server.url) as client:
        created = httpx.post(
            f"{server.url}/api/runs",
            json={"suite": SUITE.name, "task_id": ENTRY, "config": {"name": "openai-agents"}},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        run = created.json()
        handed, answer = asyncio.run(play(client, run["id"], run["urls"]["bfcl"], model))
        finished = client.finish_run(run["id"], final_answer=answer)
    model.assert_complete()
    return finished, handed


def score(finished: dict[str, Any], component: str) -> dict[str, Any]:
    return dict(next(s for s in finished["scores"] if s["component"] == component))


def test_the_openai_agents_example_plays_every_turn_and_is_scored(server: RunningServer) -> None:
    truth = ground_truth(ENTRY)
    model = scripted(truth)
    finished, handed = run_with(server, model)
    turns = SUITE.task(ENTRY).turns
    assert handed == list(range(len(turns)))
    # each model call saw tracecard's user message for its turn, and the tools of the run's
    # server without the probes' state tool
    users = [t.user for t in turns]
    first_inputs = [c.input for c in model.calls if c.input[-1].get("role") == "user"]
    assert [i[-1]["content"] for i in first_inputs] == users
    offered = {t.name for t in model.calls[0].tools}
    assert "mkdir" in offered and STATE_TOOL not in offered
    assert score(finished, "invocation")["passed"] is True
    assert score(finished, "outcome")["passed"] is True
    assert [t["passed"] for t in score(finished, "invocation")["evidence"]["turns"]] == [True] * 4
    spans = httpx.get(f"{server.url}/api/runs/{finished['id']}/spans", timeout=30).json()["spans"]
    turn_ids = {
        s["span_id"]: s["attributes"]["tracecard.turn.index"]
        for s in spans
        if s["name"].startswith("turn ")
    }
    agent_calls = [
        s
        for s in spans
        if s["name"].startswith("tools/call") and s["attributes"]["tracecard.role"] == "agent"
    ]
    recorded: list[list[str]] = [[] for _ in turns]
    for call in agent_calls:
        recorded[turn_ids[call["parent_span_id"]]].append(call["attributes"]["gen_ai.tool.name"])
    assert [sorted(r) for r in recorded] == [sorted(c["tool"] for c in t) for t in truth]


def test_a_model_with_a_wrong_argument_fails_as_bfcl_says(server: RunningServer) -> None:
    wrong = perturb(ENTRY, ground_truth(ENTRY), "changed_argument", 0)
    assert wrong is not None and bfcl_verdict(ENTRY, wrong).valid is False
    finished, _ = run_with(server, scripted(wrong))
    assert not (score(finished, "invocation")["passed"] and score(finished, "outcome")["passed"])
