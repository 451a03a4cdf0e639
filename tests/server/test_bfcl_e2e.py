"""BFCL through a real tracecard: an imported suite, its per-run BFCL MCP server (stdio, started
with the task's `{task.entry}`), and the replay agent of examples/agents/bfcl_replay.py turn by
turn. Each run gets a fresh environment; a perturbed replay fails where BFCL says it fails; the
server's verdicts equal those of the agreement measurement's recorded-shape traces."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.bfcl import bfcl_tracecard
from tests.support.tracecard import RunningServer
from tracecard.client import TracecardClient
from tracecard.server.bfcl.agreement import bfcl_verdict, simulated_spans, tracecard_verdict
from tracecard.server.bfcl.importer import import_suite
from tracecard.server.bfcl.mcp_server import STATE_TOOL
from tracecard.server.bfcl.trajectories import ground_truth, perturb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "agents"))
from bfcl_replay import replay  # noqa: E402

pytestmark = pytest.mark.slow

MULTI = "multi_turn_base_0"
TOKENS = "multi_turn_base_161"  # authenticate_travel's expected result holds an access_token
SINGLE = "parallel_0"
SUITE = import_suite(["multi_turn_base", "parallel"], ids=[MULTI, TOKENS, SINGLE], name="bfcl-e2e")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with bfcl_tracecard(tmp_path_factory.mktemp("bfcl"), SUITE) as running:
        yield running


def new_run(server: RunningServer, entry: str) -> dict[str, Any]:
    created = httpx.post(
        f"{server.url}/api/runs", json={"suite": "bfcl-e2e", "task_id": entry}, timeout=30
    )
    assert created.status_code == 201, created.text
    return dict(created.json())


def play(
    server: RunningServer,
    entry: str,
    perturbation: str | None = None,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    with TracecardClient(server.url) as client:
        run = run or new_run(server, entry)
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


@pytest.mark.parametrize("variation", ["case", "int_as_float", "tab"])
def test_surface_variations_through_the_proxy_get_bfcls_verdict(
    server: RunningServer, variation: str
) -> None:
    # 'mAROON 5' passes BFCL's standardisation, duration 15.0 fails its integer type check and
    # 'Maroon\t5' its standardisation: the recorded arguments keep what the agent sent
    trajectory = perturb(SINGLE, ground_truth(SINGLE), variation, 0)
    assert trajectory is not None
    theirs = bfcl_verdict(SINGLE, trajectory).valid
    assert theirs is (variation == "case")
    assert passed(play(server, SINGLE, variation), "invocation") is theirs


async def _peek(url: str) -> tuple[list[str], MCPError | None]:
    """An agent that lists the tools and asks for the state tool by name anyway."""
    async with httpx2.AsyncClient(timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as mcp:
            names = [t.name for t in (await mcp.list_tools()).tools]
            try:
                await mcp.call_tool(STATE_TOOL, {})
            except MCPError as exc:
                return names, exc
    return names, None


def test_the_state_tool_is_the_probes_only(server: RunningServer) -> None:
    run = new_run(server, MULTI)
    names, refused = asyncio.run(_peek(run["urls"]["bfcl"]))
    assert "mkdir" in names and STATE_TOOL not in names
    assert refused is not None and refused.error.code == -32602
    finished = play(server, MULTI, run=run)
    assert passed(finished, "outcome") is True  # every turn's probe read the state
    spans = httpx.get(f"{server.url}/api/runs/{run['id']}/spans", timeout=30).json()["spans"]
    state_calls = [s for s in spans if s["name"] == f"tools/call {STATE_TOOL}"]
    by_role = sorted(s["attributes"]["tracecard.role"] for s in state_calls)
    probed_turns = sum(1 for t in SUITE.task(MULTI).turns if t.outcome is not None)
    # the agent's refused call, and per probed turn the probe's span and the call it made
    assert by_role == ["agent"] + ["verifier"] * (2 * probed_turns)


def test_a_result_with_a_fake_credential_is_compared_in_clear(server: RunningServer) -> None:
    """BFCL's credentials are fake and results are expected as exact text: the generated
    upstream stores them in clear (`redact = false`), so the ground truth's authenticate call
    matches (a fingerprinted access_token inside the JSON text never would)."""
    finished = play(server, TOKENS)
    assert passed(finished, "invocation") is True and passed(finished, "outcome") is True
