"""A third-party scorer installed the way docs/scorers.md says (a `tracecard.scorers` entry
point, here `@scorer(component="tone")`) is a first-class component: scored when runs finish,
accepted by the verdict API and the viewer's verdict form, shown by every page, by the CLI
tables and by every export. The component list comes from the registry, nowhere else."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from rich.console import Console

from tests.support.plugins import installed_scorer
from tracecard.scorers import registry as scorer_registry
from tracecard.server.app import create_app
from tracecard.server.cli.main import main
from tracecard.server.orchestration.summary import scorecard_table
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

SUITE = """
schema_version = 1
name = "letters"

[[tasks]]
id = "reply"
instruction = "Reply to the customer"

[tasks.completion]
checks = [{ contains = "refund" }]
"""

# The plug-in: polite answers (they say "please") pass, others fail; no answer is not evaluated.
TONE_MODULE = '''
from tracecard.scorers import ComponentScore, scorer


@scorer(name="tone", component="tone", version="1")
def score_tone(task, spans, facts):
    answer = facts.final_answer
    if answer is None:
        return ComponentScore(component="tone", value=None, passed=None,
                              evidence={"reason": "no answer"}, scorer="tone", version="1")
    polite = "please" in answer.lower()
    return ComponentScore(component="tone", value=float(polite), passed=polite,
                          evidence={"polite": polite}, scorer="tone", version="1")
'''


@pytest.fixture
def tone_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Install the `tone` scorer as a distribution with an entry point (what pip would do)."""
    with installed_scorer(
        tmp_path, monkeypatch, "tone_scorer", TONE_MODULE, "tone = tone_scorer:score_tone"
    ):
        yield


async def _experiment(client: AsyncTestClient, name: str, answers: list[str]) -> dict[str, Any]:
    response = await client.post(
        "/api/experiments",
        json={"suite": "letters", "config": {"name": name}, "trials": len(answers)},
    )
    assert response.status_code == 201, response.text
    experiment: dict[str, Any] = response.json()
    for run, answer in zip(experiment["runs"], answers, strict=True):
        finished = await client.post(
            f"/api/runs/{run['id']}/finish", json={"final_answer": answer}
        )
        assert finished.status_code == 200, finished.text
    return experiment


def _tone(scores: list[dict[str, Any]]) -> dict[str, Any]:
    return next(s for s in scores if s["component"] == "tone")


async def test_a_registered_tone_scorer_flows_through_every_reader(
    tone_installed: None, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "tone" in scorer_registry.component_names()
    store = Store(settings.db)
    async with AsyncTestClient(create_app(settings, store)) as client:
        assert (await client.post("/api/suites", content=SUITE)).status_code == 201
        polite = await _experiment(client, "polite", ["Your refund is on its way, please wait"])
        curt = await _experiment(client, "curt", ["refund sent"])
        polite_run, curt_run = polite["runs"][0]["id"], curt["runs"][0]["id"]

        # Scored when the run finishes; the curt agent gets the failing score it earned.
        polite_view = (await client.get(f"/api/runs/{polite_run}")).json()
        curt_view = (await client.get(f"/api/runs/{curt_run}")).json()
        assert _tone(polite_view["scores"])["passed"] is True
        assert _tone(curt_view["scores"])["passed"] is False

        # The verdict API accepts the registered component and names the known ones otherwise.
        verdict = await client.post(
            f"/api/runs/{curt_run}/verdicts", json={"component": "tone", "agree": True}
        )
        assert verdict.status_code == 201, verdict.text
        unknown = await client.post(
            f"/api/runs/{curt_run}/verdicts", json={"component": "vibes", "agree": True}
        )
        assert unknown.status_code == 400
        assert "vibes" in unknown.text and "tone" in unknown.text

        # Every export carries the component.
        base = f"/api/experiments/{curt['id']}/scorecard"
        card = (await client.get(f"{base}.json")).json()
        assert [c["component"] for c in card["components"]][-1] == "tone"
        tone_summary = next(c for c in card["components"] if c["component"] == "tone")
        assert tone_summary["pass_rate"]["value"] == 0.0
        assert card["agreement"] == [{"scorer": "tone", "n": 1, "agree": 1, "rate": 1.0}]
        rows = list(csv.DictReader(io.StringIO((await client.get(f"{base}.csv")).text)))
        assert {(r["component"], r["passed"]) for r in rows if r["component"] == "tone"} == {
            ("tone", "false")
        }
        assert "| tone |" in (await client.get(f"{base}.md")).text
        junit = ET.fromstring((await client.get(f"{base}.xml")).content)
        assert "tone" in ET.tostring(junit, encoding="unicode")

        # The compare API pairs the experiments on it: curt regressed against polite.
        compared = await client.get(
            "/api/compare", params={"a": polite["id"], "b": curt["id"], "component": "tone"}
        )
        assert compared.status_code == 200, compared.text
        assert [t["class"] for t in compared.json()["tasks"]] == ["regressed"]

        # The viewer: the scorecard's column, the runs filter, the trace, the verdict form and
        # the experiment comparison all know the component.
        page = (await client.get(f"/experiments/{curt['id']}")).text
        assert '<th scope="col">tone</th>' in page
        runs = await client.get("/runs", params={"component": "tone"})
        assert runs.status_code == 200
        assert curt_run in runs.text and polite_run not in runs.text
        assert '<option value="tone"' in runs.text
        trace = (await client.get(f"/runs/{curt_run}")).text
        assert "tone" in trace
        compare_page = await client.get(
            "/compare/experiments", params={"a": polite["id"], "b": curt["id"], "component": "tone"}
        )
        assert compare_page.status_code == 200
        assert "regressed" in compare_page.text
        found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', trace)
        assert found is not None
        token = found.group(1)
        form = await client.post(
            f"/runs/{polite_run}/verdicts",
            data={"component": "tone", "agree": "no", "csrf_token": token},
        )
        assert form.status_code == 200, form.text
        bad_form = await client.post(
            f"/runs/{polite_run}/verdicts",
            data={"component": "vibes", "agree": "no", "csrf_token": token},
        )
        assert bad_form.status_code == 400

    # The CLI tables: the scorecard table has a tone column, `tracecard compare` pairs on it.
    console = Console(record=True, width=200)
    console.print(scorecard_table(card))
    header = console.export_text().splitlines()
    assert any("tone" in line and "outcome" in line for line in header)
    store.dispose()
    args = ["compare", polite["id"], curt["id"], "--component", "tone", "--db", settings.db]
    assert main(args) == 0
    assert "regressed" in capsys.readouterr().out
