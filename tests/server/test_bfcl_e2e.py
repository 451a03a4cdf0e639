"""BFCL through a real tracecard: an imported suite, its per-run BFCL MCP server (stdio, started
with the task's `{task.entry}`), and the replay agent of examples/agents/bfcl_replay.py turn by
turn. Each run gets a fresh environment; a perturbed replay fails where BFCL says it fails; the
server's verdicts equal those of the agreement measurement's recorded-shape traces."""

from __future__ import annotations

import asyncio
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.client import TracecardClient
from tracecard.scorers import dump_suite
from tracecard.server.bfcl.agreement import bfcl_verdict, simulated_spans, tracecard_verdict
from tracecard.server.bfcl.importer import import_suite, upstream_config
from tracecard.server.bfcl.trajectories import ground_truth, perturb
from tracecard.server.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "agents"))
from bfcl_replay import replay  # noqa: E402

pytestmark = pytest.mark.slow

MULTI = "multi_turn_base_0"
SINGLE = "parallel_0"
SUITE = import_suite(["multi_turn_base", "parallel"], ids=[MULTI, SINGLE], name="bfcl-e2e")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("bfcl")
    upstreams = tomllib.loads(upstream_config())["upstreams"]
    settings = Settings.model_validate(
        {
            "db": f"sqlite:///{folder / 'tracecard.db'}",
            "sandbox_root": str(folder / "sandboxes"),
            "upstreams": upstreams,
            "recording": {"batch_delay_ms": 50},
        }
    )
    with running_tracecard(settings) as running, TracecardClient(running.url) as client:
        client.add_suite(dump_suite(SUITE))
        yield running


def play(server: RunningServer, entry: str, perturbation: str | None = None) -> dict[str, Any]:
    with TracecardClient(server.url) as client:
        created = httpx.post(
            f"{server.url}/api/runs", json={"suite": "bfcl-e2e", "task_id": entry}, timeout=30
        )
        assert created.status_code == 201, created.text
        run = created.json()
        handed = asyncio.run(replay(client, run["id"], entry, run["urls"]["bfcl"], perturbation))
        finished = client.finish_run(run["id"], final_answer="done")
    assert handed == list(range(len(SUITE.task(entry).turns or [None])))
    return finished


def passed(finished: dict[str, Any], component: str) -> bool | None:
    return next(s["passed"] for s in finished["scores"] if s["component"] == component)


def test_every_trial_starts_from_the_entrys_initial_state(server: RunningServer) -> None:
    # mkdir('temp') would fail, and the state differ, if the second run saw the first's changes
    first, second = play(server, MULTI), play(server, MULTI)
    for run in (first, second):
        assert passed(run, "invocation") is True and passed(run, "outcome") is True
        assert passed(run, "safety") is True  # cd('..') in BFCL's virtual file system is fine
    assert first["sandbox"] != second["sandbox"]
    assert bfcl_verdict(MULTI, ground_truth(MULTI)).valid


@pytest.mark.parametrize("perturbation", ["late", "changed_argument"])
def test_the_server_agrees_with_bfcl_and_with_the_recorded_shape(
    server: RunningServer, perturbation: str | None
) -> None:
    finished = play(server, MULTI, perturbation)
    task = SUITE.task(MULTI)
    trajectory = ground_truth(MULTI)
    if perturbation is not None:
        trajectory = perturb(MULTI, trajectory, perturbation, 0) or trajectory
    verdict = passed(finished, "invocation") is True and passed(finished, "outcome") is True
    assert verdict is bfcl_verdict(MULTI, trajectory).valid is False
    simulated, _ = tracecard_verdict(task, simulated_spans(task, MULTI, trajectory))
    assert simulated == verdict


def test_a_single_turn_entry_is_judged_by_its_possible_answers(server: RunningServer) -> None:
    assert passed(play(server, SINGLE), "invocation") is True
    assert passed(play(server, SINGLE, "dropped"), "invocation") is False
