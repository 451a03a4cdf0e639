"""The experiment page says, beside the tasks × components matrix, which cells are missing from
its numbers because the infrastructure failed (and how to rerun them), and which cells were
scored from a later attempt: the scorecard's own `infra` and `attempt`, the same as its JSON.

The store holds what the durable jobs leave (tests/server/test_jobs_infra.py provokes it for
real): `fetch#0` lost to a dead worker then finished as attempt 2, `sum#1` lost to a worker and
`write#1` to a sandbox that could not be made (no attempt left to score), the other cells
finished once. An experiment of the same suite with no lost attempt shows no note."""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.tracecard import running_tracecard
from tests.viewer.test_browser import (  # noqa: F401 (fixtures; marks: browser, needs chromium)
    SHOTS,
    Watched,
    browser_context,
    pytestmark,
    watched,
)
from tracecard.server.evaluation.service import store_suite
from tracecard.server.settings import Settings
from tracecard.traces.models import ExperimentRow, JobAttemptRow, RunRow, ScoreRow
from tracecard.traces.store import Store

SUITE = """
schema_version = 1
name = "infra"
[[tasks]]
id = "fetch"
instruction = "say 42"
[[tasks]]
id = "sum"
instruction = "say 42"
[[tasks]]
id = "write"
instruction = "say 42"
"""
# (task, trial, attempt, end reason or None: finished and scored)
ATTEMPTS = [
    ("fetch", 0, 1, "worker_lost"),
    ("fetch", 0, 2, None),
    ("fetch", 1, 1, None),
    ("sum", 0, 1, None),
    ("sum", 1, 1, "worker_lost"),
    ("write", 0, 1, None),
    ("write", 1, 1, "sandbox_failed"),
]
# The lost cells rerun and finished: every cell in the numbers, the lost attempts still counted.
RECOVERED = [*ATTEMPTS, ("sum", 1, 2, None), ("write", 1, 2, None)]
# Each cell once, at its first attempt.
CLEAN = [(task, trial, 1, None) for task, trial, attempt, reason in ATTEMPTS if reason is None]


@dataclass
class Served:
    url: str
    lossy: str
    recovered: str
    clean: str


def _experiment(
    store: Store, version: str, name: str, at: datetime, attempts: list[tuple[str, int, int, Any]]
) -> str:
    experiment = ExperimentRow(
        id=secrets.token_hex(8),
        suite_name="infra",
        suite_version=version,
        config_name=name,
        trials=2,
        created_at=at,
    )
    rows: list[Any] = [experiment]
    same = {"experiment_id": experiment.id, "suite_name": "infra", "suite_version": version}
    for n, (task, trial, attempt, reason) in enumerate(attempts):
        created = at + timedelta(minutes=n)
        run = RunRow(
            id=secrets.token_hex(8),
            trace_id=secrets.token_hex(16),
            root_span_id=secrets.token_hex(8),
            task_id=task,
            trial=trial,
            config_name=name,
            status="errored" if reason else "finished",
            end_reason=reason,
            final_answer=None if reason else "42",
            created_at=created,
            started_at=created,
            finished_at=created + timedelta(seconds=2),
            **same,
        )
        rows.append(run)
        rows.append(
            JobAttemptRow(
                run_id=run.id,
                experiment_id=experiment.id,
                task_id=task,
                trial=trial,
                attempt=attempt,
                executor="w1",
                host="box-1",
                state="lost" if reason == "worker_lost" else "ended",
                reason=reason,
            )
        )
        if reason is None:
            rows.append(
                ScoreRow(
                    run_id=run.id,
                    component="completion",
                    value=1.0,
                    passed=True,
                    evidence={"answer": "42"},
                    scorer="completion",
                    scorer_version="1",
                )
            )
    store.add_all(rows)
    return experiment.id


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("infra-note")
    url = f"sqlite:///{folder / 'tracecard.db'}"
    store = Store(url)
    store.create_schema()
    _, suite = store_suite(store, SUITE, "toml", "infra.toml")
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    lossy = _experiment(store, suite.version, "lossy", at, ATTEMPTS)
    recovered = _experiment(store, suite.version, "recovered", at, RECOVERED)
    clean = _experiment(store, suite.version, "clean", at + timedelta(minutes=30), CLEAN)
    settings = Settings(db=url, sandbox_root=str(folder / "sandboxes"))
    with running_tracecard(settings) as server:
        yield Served(server.url, lossy, recovered, clean)
    store.dispose()


def _shot(watched: Watched, name: str) -> None:  # noqa: F811
    """A screenshot, copied where the team keeps the ones a person looked at."""
    watched.shot(name)
    kept = Path("/work/team/shots/infraview")
    if kept.parent.is_dir():
        kept.mkdir(exist_ok=True)
        shutil.copy(SHOTS / f"{name}.png", kept / f"{name}.png")


def _text(locator: Any) -> str:
    return re.sub(r"\s+", " ", locator.inner_text()).strip()


def test_the_matrix_says_which_cells_the_infrastructure_kept_out(
    served: Served,
    watched: Watched,  # noqa: F811
) -> None:
    card = httpx.get(f"{served.url}/api/experiments/{served.lossy}/scorecard.json").json()
    assert card["infra"] == {
        "attempts": {"sandbox_failed": 1, "worker_lost": 2},
        "cells": ["sum#1", "write#1"],
    }
    page = watched.page
    page.goto(f"{served.url}/experiments/{served.lossy}")
    note = page.locator("#infra-note")
    assert note.count() == 1
    # Before the matrix, where a person reads the numbers it qualifies.
    assert page.evaluate(
        "document.querySelector('#infra-note').compareDocumentPosition("
        "document.querySelector('table.matrix')) & Node.DOCUMENT_POSITION_FOLLOWING"
    )
    assert _text(note.locator("[data-infra=lost]")) == (
        "2 cells not in these numbers: the infrastructure failed, not the agent "
        "(lost attempts: sandbox_failed 1, worker_lost 2): sum#1, write#1. "
        f"Rerun them with tracecard experiment rerun {served.lossy} --cells infra."
    )
    # The same cells the JSON names, each a link to its task's runs.
    links = note.locator("[data-infra=lost] a")
    assert [links.nth(i).inner_text() for i in range(links.count())] == card["infra"]["cells"]
    assert links.first.get_attribute("href") == f"/runs?experiment={served.lossy}&task=sum"
    later = [f"{r['task_id']}#{r['trial']} (attempt {r['attempt']})" for r in card["runs"]
             if (r.get("attempt") or 1) > 1]  # fmt: skip
    assert later == ["fetch#0 (attempt 2)"]
    assert _text(note.locator("[data-infra=later]")) == (
        "Scored from a later attempt (each cell's latest completed attempt is the one scored): "
        "fetch#0 (attempt 2)."
    )
    # The matrix's numbers leave the two cells out: sum and write have 1 evaluated trial each.
    row = page.locator("table.matrix tbody tr", has_text="write")
    assert _text(row.locator("td[data-component=completion] .rate")).endswith("1/1")
    _shot(watched, "infra-note-experiment")

    # Every lost cell rerun: nothing missing, the lost attempts still said, three later attempts.
    page.goto(f"{served.url}/experiments/{served.recovered}")
    assert _text(page.locator("#infra-note [data-infra=lost]")) == (
        "Attempts lost to the infrastructure, not the agent (kept, never scored): "
        "sandbox_failed 1, worker_lost 2; every cell has a completed attempt, so all of them "
        "are in these numbers."
    )
    assert _text(page.locator("#infra-note [data-infra=later]")).endswith(
        "fetch#0 (attempt 2), sum#1 (attempt 2), write#1 (attempt 2)."
    )
    row = page.locator("table.matrix tbody tr", has_text="write")
    assert _text(row.locator("td[data-component=completion] .rate")).endswith("2/2")
    _shot(watched, "infra-note-recovered")

    page.goto(f"{served.url}/experiments/{served.clean}")
    assert page.locator("table.matrix").count() == 1
    assert page.locator("#infra-note").count() == 0
    watched.clean()
