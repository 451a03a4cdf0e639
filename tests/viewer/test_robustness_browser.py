"""Robustness in a real Chromium (docs/replay.md, "Robustness"): a faulted experiment's page
shows with faults vs without (compare's verdict, the changed tasks) and the fault kinds, and the
runs list marks each faulted run with a chip; an experiment without faults shows neither.

The store holds two experiments of one config on one suite: `calm` (no fault plan) and
`stormy` (a `tool_error` plan), their runs' spans as the proxy records them (the faulted call
carries `tracecard.fault.kind`), scored by the real scorers (`rescore`)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.tracecard import running_tracecard
from tests.viewer.data import LOOKUP, PROBES, SCRIPTS, SUITE, Call, _hex, add_run, tool_span
from tests.viewer.test_browser import (  # noqa: F401 (fixtures; marks: browser, needs chromium)
    SHOTS,
    Watched,
    browser_context,
    pytestmark,
    watched,
)
from tracecard.server.evaluation.service import rescore, store_suite
from tracecard.server.settings import Settings
from tracecard.traces import semconv as sc
from tracecard.traces.models import ExperimentRow, RunRow
from tracecard.traces.store import Store

PLAN = {"seed": 7, "rules": [{"id": "rule-1", "kind": "tool_error", "tool": "lookup_order"}]}
# Per experiment: (task, script, faulted first lookup?) per trial.
TRIALS = {
    "calm": [("refund-order", "refund.good", False)] * 3 + [("weather", "weather.good", False)] * 3,
    "stormy": [
        ("refund-order", "refund.good", True),  # faulted, retried: recovered, passes
        ("refund-order", "refund.skip-all", True),  # faulted, gave up: not recovered, fails
        ("refund-order", "refund.good", False),
        *[("weather", "weather.good", False)] * 3,
    ],
}


@dataclass
class Stormy:
    url: str
    experiments: dict[str, str]
    runs: dict[str, list[str]]


def _faulted_lookup(run: RunRow) -> dict[str, object]:
    """The agent's first lookup_order, answered by the fault plan (as the proxy records it)."""
    call: Call = ("lookup_order", LOOKUP[1], "service unavailable", sc.ERR_TOOL, 20)
    start = int(run.created_at.timestamp() * 1e9) + 1_000_000
    span = tool_span(run, call, start, run.root_span_id)
    span["attributes"] |= {sc.FAULT_KIND: "tool_error", sc.FAULT_RULE: "rule-1"}
    return span


@pytest.fixture(scope="module")
def stormy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stormy]:
    folder = tmp_path_factory.mktemp("stormy")
    url = f"sqlite:///{folder / 'tracecard.db'}"
    store = Store(url)
    store.create_schema()
    _, suite = store_suite(store, SUITE, "toml", "nightly.toml")
    now = datetime.now(UTC).replace(microsecond=0)
    experiments: dict[str, str] = {}
    runs: dict[str, list[str]] = {}
    scored = []
    for index, (name, trials) in enumerate(TRIALS.items()):
        started = now - timedelta(hours=2 - index)
        experiment = ExperimentRow(
            id=_hex(8),
            suite_name="nightly",
            suite_version=suite.version,
            config_name="desk-agent",
            trials=3,
            environment={"faults": PLAN} if name == "stormy" else None,
            created_at=started,
        )
        store.add_all([experiment])
        experiments[name] = experiment.id
        for number, (task, script, faulted) in enumerate(trials):
            created = started + timedelta(minutes=number)
            run = RunRow(
                id=_hex(8),
                experiment_id=experiment.id,
                suite_name="nightly",
                suite_version=suite.version,
                task_id=task,
                trial=number % 3,
                config_name="desk-agent",
                status="finished",
                final_answer="Done: refund issued." if task == "refund-order" else "Paris: 21",
                trace_id=_hex(16),
                root_span_id=_hex(8),
                created_at=created,
                started_at=created,
                finished_at=created + timedelta(seconds=3),
                sandbox="/sandbox",
            )
            probe = PROBES["refund.skip" if script == "refund.skip-all" else script]
            add_run(store, run, SCRIPTS.get(script, []), probe)
            if faulted:
                store.insert_spans([_faulted_lookup(run)])
            runs.setdefault(name, []).append(run.id)
            scored.append(run)
    rescore(store, scored)
    settings = Settings(db=url, sandbox_root=str(folder / "sandboxes"))
    with running_tracecard(settings) as server:
        yield Stormy(server.url, experiments, runs)
    store.dispose()


def _keep(name: str) -> None:
    """A copy of the screenshot where the team keeps the ones a person looked at."""
    kept = Path("/work/team/shots/replay")
    if kept.parent.is_dir():
        kept.mkdir(exist_ok=True)
        shutil.copy(SHOTS / f"{name}.png", kept / f"{name}.png")


def test_a_faulted_experiment_shows_with_faults_vs_without(
    stormy: Stormy,
    watched: Watched,  # noqa: F811
) -> None:
    page, calm, faulted = watched.page, stormy.experiments["calm"], stormy.experiments["stormy"]
    page.goto(f"{stormy.url}/experiments/{faulted}")
    section = page.locator("#robustness")
    assert section.get_by_text("faults · seed 7 · 1 rule").count() == 1
    box = section.locator(f".verdict-box[data-paired='{calm}']")
    heading = box.locator("h3").inner_text()
    assert heading.startswith("With faults vs without: undecided")  # 2 tasks: too few to decide
    assert box.locator("[data-stat=without]").inner_text() == "1.00"
    assert box.locator("[data-stat=with]").inner_text() == "0.83"  # (2/3 + 1) / 2
    assert "2 paired task(s); at least 5 are needed to decide" in box.inner_text()
    rows = box.locator("table tbody tr")
    assert rows.count() == 1
    assert re.sub(r"\s+", " ", rows.first.inner_text()).strip() == (
        "refund-order 1.00 0.67 -0.33 regressed"
    )
    kind = section.locator("tr[data-kind=tool_error]")
    assert re.sub(r"\s+", " ", kind.inner_text()).startswith("tool_error 1/2 1/2 after tool_error")
    watched.shot("robustness-experiment")
    _keep("robustness-experiment")
    box.get_by_role("link", name="the full comparison").click()
    page.wait_for_url(re.compile(rf"/compare/experiments\?a={calm}&b={faulted}"))
    assert page.locator("#verdict-h").inner_text() == "undecided"  # the same verdict

    # The runs list: a chip on every run of the faulted experiment, none on the calm one.
    page.goto(f"{stormy.url}/runs?config=desk-agent")
    page.wait_for_function("document.querySelectorAll('#runs-table tbody tr').length === 12")
    for run_id in stormy.runs["stormy"]:
        chip = page.locator(f"#run-{run_id} .chip.env-faults")
        assert chip.inner_text() == "faults"
        assert "(seed 7)" in (chip.get_attribute("title") or "")
        assert "tool_error" in (chip.get_attribute("title") or "")
    for run_id in stormy.runs["calm"]:
        assert page.locator(f"#run-{run_id} .chip.env-faults").count() == 0
    watched.shot("robustness-runs")
    _keep("robustness-runs")

    page.goto(f"{stormy.url}/experiments/{calm}")
    assert page.locator("table.matrix").count() == 1 and page.locator("#robustness").count() == 0
    watched.clean()
