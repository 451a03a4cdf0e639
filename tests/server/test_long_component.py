"""A third-party component whose name is longer than the built-ins' (51 characters; the
database held 32 before migration c5e7a2d94b31) works end to end on real SQLite and real
PostgreSQL: scored when the run finishes, stored, rescored, accepted by the verdict API and
shown by the scorecard. A name over the limit is refused when the scorer is registered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from tests.support.plugins import installed_scorer
from tracecard.scorers import RegistryError
from tracecard.scorers import registry as scorer_registry
from tracecard.server.app import create_app
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

LONG = "acme_customer_support_tone_and_politeness_rubric_v2"

SUITE = """
schema_version = 1
name = "letters"

[[tasks]]
id = "reply"
instruction = "Reply to the customer"
"""

MODULE = """
from tracecard.scorers import ComponentScore, scorer

COMPONENT = {component!r}


@scorer(name="politeness", component=COMPONENT, version="1")
def score_politeness(task, spans, facts):
    polite = "please" in (facts.final_answer or "").lower()
    return ComponentScore(component=COMPONENT, value=float(polite), passed=polite,
                          evidence={{"polite": polite}}, scorer="politeness", version="1")
"""


@pytest.fixture
def politeness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    source = MODULE.format(component=LONG)
    entry = "politeness = politeness_scorer:score_politeness"
    with installed_scorer(tmp_path, monkeypatch, "politeness_scorer", source, entry):
        yield


async def test_a_long_component_name_is_stored_and_served(
    politeness: None, db_url: str, tmp_path: Path
) -> None:
    assert len(LONG) > 32 and LONG in scorer_registry.component_names()
    settings = Settings(db=db_url, sandbox_root=str(tmp_path / "sandboxes"))
    store = Store(settings.db)
    async with AsyncTestClient(create_app(settings, store)) as client:
        assert (await client.post("/api/suites", content=SUITE)).status_code == 201
        created = await client.post(
            "/api/experiments", json={"suite": "letters", "config": {"name": "curt"}}
        )
        assert created.status_code == 201, created.text
        experiment = created.json()
        [run] = experiment["runs"]
        finished = await client.post(
            f"/api/runs/{run['id']}/finish", json={"final_answer": "refund sent"}
        )
        assert finished.status_code == 200, finished.text
        [score] = [s for s in finished.json()["scores"] if s["component"] == LONG]
        assert score["passed"] is False  # curt: the plug-in's fail, stored under its full name

        rescored = await client.post(f"/api/runs/{run['id']}/rescore")
        assert rescored.status_code == 200, rescored.text
        stored = (await client.get(f"/api/runs/{run['id']}")).json()["scores"]
        assert [s["passed"] for s in stored if s["component"] == LONG] == [False]

        verdict = await client.post(
            f"/api/runs/{run['id']}/verdicts", json={"component": LONG, "agree": True}
        )
        assert verdict.status_code == 201, verdict.text
        card = (await client.get(f"/api/experiments/{experiment['id']}/scorecard.json")).json()
        summary = next(c for c in card["components"] if c["component"] == LONG)
        assert summary["pass_rate"]["value"] == 0.0
        assert card["agreement"] == [{"scorer": "politeness", "n": 1, "agree": 1, "rate": 1.0}]
    store.dispose()


def test_a_component_name_over_the_limit_is_refused_at_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    too_long = "x" * (scorer_registry.MAX_COMPONENT_LENGTH + 1)
    source = MODULE.format(component=too_long)
    entry = "politeness = politeness_scorer:score_politeness"
    with installed_scorer(tmp_path, monkeypatch, "politeness_scorer", source, entry):
        with pytest.raises(RegistryError) as caught:
            scorer_registry.default_registry()
    message = str(caught.value)
    assert "'politeness'" in message and "politeness_scorer" in message
    assert "is 129 characters; component names are 1 to 128 characters" in message
