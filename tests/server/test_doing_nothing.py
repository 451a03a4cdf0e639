"""Scores that cannot be earned by doing nothing (#19.3, #26.5): a do-nothing agent and a looping
agent, scripted, through the real proxy to the helpdesk's stdio MCP server (a fresh process and
fixture per run, as in the demo), get exact scores."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console

from tests.examples.helpers import ROOT
from tracecard.client import TracecardClient
from tracecard.scorers import Scorecard, dump_suite, parse_suite
from tracecard.scorers.types import ComponentScore
from tracecard.server.cli.demo import demo_settings
from tracecard.server.cli.run_process import orchestrate
from tracecard.server.evaluation.service import scorecard_for
from tracecard.server.orchestration.agents import PythonAgent
from tracecard.server.orchestration.embedded import embedded_server
from tracecard.traces.store import Store

TASKS = ("reopen-laptop", "inactive-support", "escalate-globex")
CLAIM = "Done: T-1006 is reopened and assigned to Omar Haddad."


async def _nothing(env: Mapping[str, str]) -> str:
    if env["TRACECARD_TASK_ID"] == "escalate-globex":
        raise RuntimeError("the agent crashed before its first call")
    return CLAIM  # claims success, calls nothing


async def _looping(env: Mapping[str, str]) -> str:
    """Asks the same question over and over before doing the work."""
    async with Client(streamable_http_client(env["TRACECARD_UPSTREAM_HELPDESK"])) as session:
        if env["TRACECARD_TASK_ID"] == "escalate-globex":
            return "Escalated."  # a claim, and nothing done
        if env["TRACECARD_TASK_ID"] == "inactive-support":
            for _ in range(6):
                await session.call_tool("find_users", {"team": "support"})
            return "ivan.petrov@acme.example, sam.carter@acme.example"
        for _ in range(3):
            await session.call_tool("find_users", {"query": "omar"})
        await session.call_tool(
            "update_ticket", {"ticket_id": "T-1006", "status": "open", "assignee": "u-102"}
        )
        return CLAIM


def _suite(folder: Path) -> Path:
    document = tomllib.loads((ROOT / "examples" / "helpdesk" / "suite.toml").read_text())
    document["tasks"] = [t for t in document["tasks"] if t["id"] in TASKS]
    path = folder / "suite.toml"
    path.write_text(dump_suite(parse_suite(json.dumps(document), "json")))
    return path


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Scorecard]]:
    folder = tmp_path_factory.mktemp("nothing")
    settings = demo_settings(folder, 0)
    ids = {}
    with embedded_server(settings, use_running=False) as served:
        with TracecardClient(served.base_url) as client:
            suite = client.add_suite(_suite(folder))
            for name, function in (("nothing", _nothing), ("looping", _looping)):
                experiment = client.create_experiment(suite["version"], {"name": name}, 1)
                ids[name] = experiment.id
                orchestrate(
                    client,
                    experiment,
                    PythonAgent(function),
                    console=Console(quiet=True),
                    concurrency=2,
                    timeout_s=30,
                    work_dir=folder / name,
                    progress=False,
                )
    store = Store(settings.db)
    yield {name: scorecard_for(store, experiment_id) for name, experiment_id in ids.items()}
    store.dispose()


def _score(card: Scorecard, task_id: str, component: str) -> ComponentScore:
    run = next(r for r in card.runs if r.task_id == task_id)
    return next(s for s in run.components if s.component == component)


def _values(card: Scorecard, task_id: str) -> dict[str, Any]:
    run = next(r for r in card.runs if r.task_id == task_id)
    return {s.component: (s.value, s.passed) for s in run.components if s.component != "composite"}


def test_doing_nothing_earns_nothing(cards: dict[str, Scorecard]) -> None:
    card = cards["nothing"]
    # the hallucinated completion: the answer claims the work, the state is the start state
    assert _values(card, "reopen-laptop") == {
        "invocation": (0.0, False),
        "completion": (1.0, True),
        "outcome": (0.0, False),  # was 0.5: the assignee already held in the start state
        "safety": (1.0, True),
        "efficiency": (None, None),  # was 1.0 with 0 calls
    }
    efficiency = _score(card, "reopen-laptop", "efficiency")
    assert efficiency.evidence["calls"] == 0 and "no tool calls" in efficiency.evidence["reason"]
    assert _values(card, "inactive-support")["efficiency"] == (None, None)
    # the agent that crashed before its first call: outcome 0 (#26.5)
    errored = next(r for r in card.runs if r.task_id == "escalate-globex")
    assert errored.status == "errored"
    outcome = _score(card, "escalate-globex", "outcome")
    assert (outcome.value, outcome.passed) == (0.0, False)
    assert outcome.evidence["reason"].startswith("the run errored before its first call")
    # its per-run server never started, so the file probe had no sandbox: before, "not
    # evaluated" left the run out of the pass rate; now it counts as the failure it is
    assert outcome.evidence["not_evaluated"][0]["reason"] == (
        "the run has no sandbox to read files from"
    )


def test_looping_is_charged_beyond_max_repeats(cards: dict[str, Scorecard]) -> None:
    card = cards["looping"]
    # find_users(team=support) x6: 1 matched, 4 charged beyond max_repeats = 2 -> F1 2/(1+5)
    invocation = _score(card, "inactive-support", "invocation")
    assert (invocation.value, invocation.passed) == (pytest.approx(1 / 3), False)
    assert invocation.evidence["reason"] == (
        "identical calls beyond max_repeats = 2: find_users ×6"
    )
    efficiency = _score(card, "inactive-support", "efficiency")  # 1/6 economy x 1/6 non-redundant
    assert efficiency.value == pytest.approx(1 / 36) and efficiency.passed is False
    assert _values(card, "inactive-support")["completion"] == (1.0, True)
    # a finished run that opened a session and changed nothing: the two "leave T-1009 and
    # T-1002 alone" predicates held in the start state; they are marked, and earn nothing
    # (version 4 gave 0.40, #26.5)
    outcome = _score(card, "escalate-globex", "outcome")
    assert (outcome.value, outcome.passed) == (0.0, False)
    assert [r.get("unchanged") for r in outcome.evidence["predicates"]] == [
        None, None, None, True, True,
    ]  # fmt: skip
    assert outcome.evidence["reason"] == (
        "no tool calls: the 2 predicate(s) that hold held in the start state (unchanged); "
        "no partial credit"
    )
    # reopen: find_users(omar) x3 then the update: 2 matched, 1 charged -> F1 4/5; the state
    # is right, so the outcome passes on its own merits
    assert _values(card, "reopen-laptop") == {
        "invocation": (pytest.approx(0.8), False),
        "completion": (1.0, True),
        "outcome": (1.0, True),
        "safety": (1.0, True),
        "efficiency": (pytest.approx(0.5 * (1 - 2 / 4)), False),
    }
