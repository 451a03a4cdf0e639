"""`tracecard suite check / score / export / gate / compare` on a real database."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest
from litestar.testing import AsyncTestClient

from tests.server.test_evaluation_api import SUITE, tool_span
from tracecard.server.app import create_app
from tracecard.server.cli.main import main
from tracecard.server.settings import Settings
from tracecard.traces.store import Store


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    document = settings.model_dump()
    document["upstreams"] = {"tools": {"url": "http://127.0.0.1:9/mcp"}}
    return Settings.model_validate(document)


async def _scored_experiment(settings: Settings, name: str, right: bool) -> str:
    store = Store(settings.db)
    async with AsyncTestClient(create_app(settings, store)) as client:
        await client.post("/api/suites", content=SUITE)
        experiment = (
            await client.post(
                "/api/experiments", json={"suite": "notes", "config": {"name": name}, "trials": 2}
            )
        ).json()
        for n, run in enumerate(experiment["runs"]):
            full = (await client.get(f"/api/runs/{run['id']}")).json()
            if run["task_id"] == "echo-hello":
                text = "hello" if right else "nope"
                store.insert_spans([tool_span(full, "echo", {"text": text}, n)])
                answer = text
            else:
                answer = "hi" if right else "hello there"
            await client.post(f"/api/runs/{run['id']}/finish", json={"final_answer": answer})
    return str(experiment["id"])


def test_suite_check_reports_file_field_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.toml"
    good.write_text(SUITE)
    bad = tmp_path / "bad.toml"
    bad.write_text(SUITE.replace('exact = "hello"', 'regex = "(unclosed"'))
    assert main(["suite", "check", str(good)]) == 0
    assert "ok" in capsys.readouterr().out
    assert main(["suite", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.toml" in err and "tasks[0].invocation" in err and "regex" in err
    # a wrong suite is the check's "no" (1); a file that is not there is bad input (2)
    assert main(["suite", "check", str(good), str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err
    assert "missing.toml" in err


async def test_score_export_gate_compare(
    app_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = await _scored_experiment(app_settings, "good", right=True)
    poor = await _scored_experiment(app_settings, "poor", right=False)
    db = ["--db", app_settings.db]

    assert main(["score", "--experiment", good, "--quiet", *db]) == 0
    assert "rescored 4 of 4" in capsys.readouterr().out

    out = tmp_path / "card.json"
    assert main(["export", "--experiment", good, "--format", "json", "-o", str(out), *db]) == 0
    card = orjson.loads(out.read_text())
    assert {t["task_id"] for t in card["tasks"]} == {"echo-hello", "no-tools"}
    assert main(["export", "--experiment", poor, "--format", "xml", *db]) == 0
    junit = ET.fromstring(capsys.readouterr().out)
    # both tasks fail for the poor config: testcases per task x component name what failed
    failed = {
        (c.get("classname"), c.get("name"))
        for c in junit.iter("testcase")
        if c.find("failure") is not None
    }
    assert {cls for cls, _ in failed} == {"notes.echo-hello", "notes.no-tools"}, failed

    assert main(["gate", "--experiment", good, "--min", "invocation=1.0", *db]) == 0
    assert main(["gate", "--experiment", poor, "--min", "completion=0.5", *db]) == 1
    assert "FAIL completion" in capsys.readouterr().out

    assert main(["compare", good, poor, "--component", "completion", *db]) == 0
    printed = capsys.readouterr().out
    # two tasks cannot decide
    assert "regressed" in printed and "verdict on completion: undecided" in printed

    assert main(["gate", "--experiment", good, "--min", "outcome", *db]) == 2
    assert "COMPONENT[.STATISTIC]=VALUE" in capsys.readouterr().err
