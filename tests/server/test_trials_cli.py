"""`tracecard compare` says, under an undecided verdict, what more trials would (or would not)
do: the trials estimate of docs/scorecards.md, in the table output and in `--json`; and
`tracecard audit --history` judges tasks across the stored experiments."""

from __future__ import annotations

import orjson
import pytest

from tests.server.test_cli_evaluation import _scored_experiment
from tracecard.server.cli.main import main
from tracecard.server.settings import Settings


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    document = settings.model_dump()
    document["upstreams"] = {"tools": {"url": "http://127.0.0.1:9/mcp"}}
    return Settings.model_validate(document)


async def test_an_undecided_compare_says_what_more_trials_would_do(
    app_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    good = await _scored_experiment(app_settings, "good", right=True)
    poor = await _scored_experiment(app_settings, "poor", right=False)
    db = ["--db", app_settings.db]
    assert main(["compare", good, poor, "--component", "completion", *db]) == 0
    printed = capsys.readouterr().out
    assert "verdict on completion: undecided" in printed
    # two tasks: no number of trials can decide, and it says why
    assert "trials to decide: 2 paired task(s): at least 5 are needed" in printed
    assert main(["compare", good, poor, "--component", "completion", "--json", *db]) == 0
    needed = orjson.loads(capsys.readouterr().out)["trials_needed"]
    assert needed["tasks"] == 2 and needed["trials_now"] == 2
    assert needed["trials_needed"] is None and needed["effect"] == -1.0


async def test_audit_history_flags_a_task_every_configuration_passes(
    app_settings: Settings,
    tmp_path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.server.test_evaluation_api import SUITE

    monkeypatch.setenv("COLUMNS", "200")  # the table's text unfolded

    await _scored_experiment(app_settings, "good", right=True)
    await _scored_experiment(app_settings, "poor", right=False)
    suite = tmp_path / "notes.toml"
    suite.write_text(SUITE, encoding="utf-8")
    argv = ["audit", str(suite), "--history", "--db", app_settings.db]
    assert main([*argv, "--component", "invocation", "--json"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert [e["config"] for e in document["experiments"]] == ["poor", "good"]
    health = {t["task_id"]: (t["kind"], t["rates"]) for t in document["tasks"]}
    # neither configuration calls a tool on no-tools: it cannot tell them apart
    assert health["no-tools"] == ("passed_by_all", {"poor": 1.0, "good": 1.0})
    assert health["echo-hello"] == (None, {"poor": 0.0, "good": 1.0})
    assert main([*argv, "--component", "invocation"]) == 0
    printed = capsys.readouterr().out
    assert "1 of 2 tasks flagged across 2 experiments" in printed
    assert "passed by every configuration" in printed


async def test_the_suite_health_page_shows_the_same_finding(app_settings: Settings) -> None:
    from litestar.testing import AsyncTestClient

    from tracecard.server.app import create_app
    from tracecard.traces.store import Store

    good = await _scored_experiment(app_settings, "good", right=True)
    await _scored_experiment(app_settings, "poor", right=False)
    async with AsyncTestClient(create_app(app_settings, Store(app_settings.db))) as client:
        experiment = (await client.get(f"/experiments/{good}")).text
        link = experiment.split("/suites/", 1)[1].split('"', 1)[0]
        assert link.endswith("/health")
        page = await client.get(f"/suites/{link}?component=invocation")
        assert page.status_code == 200
        html = page.text
        assert "Suite health on invocation" in html
        assert "1 of 2 tasks flagged across 2 configurations" in html
        assert "passed by every configuration" in html and ">no-tools<" in html
        outcome = (await client.get(f"/suites/{link}")).text  # neither task has an outcome
        assert "0 of 2 tasks flagged" in outcome
        assert (await client.get("/suites/nope/health")).status_code == 404
