"""CI commands that cannot pass by accident (#9 item 6): exit codes and --json of run, gate,
compare, score and export, on a real database and a real embedded server."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from litestar.testing import AsyncTestClient

from tracecard.server.app import create_app
from tracecard.server.cli.main import main
from tracecard.server.evaluation.service import scorecard_for
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

SUITE = 'schema_version = 1\nname = "five"\n' + "".join(
    f'\n[[tasks]]\nid = "t{i}"\ninstruction = "Say yes."\n'
    f'[tasks.completion]\nchecks = [{{ exact = "yes" }}]\n'
    for i in range(5)
)


async def _experiment(settings: Settings, name: str, answer: str, suite: str = SUITE) -> str:
    store = Store(settings.db)
    async with AsyncTestClient(create_app(settings, store)) as client:
        version = (await client.post("/api/suites", content=suite)).json()["version"]
        body = {"suite": version, "config": {"name": name}, "trials": 2}
        experiment = (await client.post("/api/experiments", json=body)).json()
        for run in experiment["runs"]:
            await client.post(f"/api/runs/{run['id']}/finish", json={"final_answer": answer})
    return str(experiment["id"])


@pytest.fixture
async def experiments(settings: Settings) -> tuple[str, str, list[str]]:
    good = await _experiment(settings, "good", "yes")
    poor = await _experiment(settings, "poor", "no")
    return good, poor, ["--db", settings.db]


def _json(capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    return orjson.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_gate_usage_errors_exit_2(
    experiments: tuple[str, str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    good, _poor, db = experiments
    gate = ["gate", "--experiment", good, *db]
    assert main(gate) == 2
    assert "gate needs at least one check" in capsys.readouterr().err
    assert main([*gate, "--min", "outcom=0.5"]) == 2
    err = capsys.readouterr().err
    assert "unknown component 'outcom' (did you mean outcome?)" in err
    assert "known: invocation, completion, outcome, safety, efficiency, composite" in err
    for bad in ("completion=1.5", "completion=-0.1", "completion=150%", "completion=high"):
        assert main([*gate, "--min", bad]) == 2, bad
        assert "--min" in capsys.readouterr().err
    for unknown in ("outcome.pass^0", "outcome.median"):  # a statistic not in the vocabulary
        assert main([*gate, "--min", f"{unknown}=0.5"]) == 2
        err = capsys.readouterr().err
        assert f"unknown statistic {unknown.split('.')[1]!r}" in err
        assert "valid: pass_rate (the default), mean, pass@K, pass^K (K = 1, 2, ...), flip" in err


async def test_a_baseline_on_another_suite_version_is_a_usage_error(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    old = await _experiment(settings, "old", "yes", SUITE.replace("Say yes.", "Say yes!"))
    new = await _experiment(settings, "new", "yes")
    argv = ["gate", "--experiment", new, "--baseline", "old", "--no-regress", "--db", settings.db]
    assert main(argv) == 2
    err = capsys.readouterr().err
    store = Store(settings.db)
    versions = [scorecard_for(store, e).suite.version[:12] for e in (old, new)]
    store.dispose()
    assert versions[0] != versions[1]
    assert f"--baseline old ran suite five version {versions[0]}" in err
    assert f"experiment {new} ran five version {versions[1]}" in err


def test_gate_passes_fails_and_not_evaluated(
    experiments: tuple[str, str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    good, poor, db = experiments
    assert main(["gate", "--experiment", good, "--min", "completion=80%", *db]) == 0
    assert main(["gate", "--experiment", poor, "--min", "completion=0.8", *db]) == 1
    assert "FAIL completion" in capsys.readouterr().out
    # no outcome expectations: not evaluated fails, unless allowed
    assert main(["gate", "--experiment", good, "--min", "outcome=0.5", *db]) == 1
    assert "FAIL outcome pass_rate: not evaluated (threshold 0.50)" in capsys.readouterr().out
    allowed = ["--min", "outcome=0.5", "--min", "completion=1", "--allow-not-evaluated"]
    assert main(["gate", "--experiment", good, *allowed, *db]) == 0
    out = capsys.readouterr().out
    assert "SKIP outcome.pass_rate: not evaluated" in out
    assert "PASS completion pass_rate 1.00 >= 1.00" in out  # a pass says what it measured
    assert main(["gate", "--experiment", poor, "--min", "completion=0.8", "--json", *db]) == 1
    result = _json(capsys)
    assert result["experiment_id"] == poor and result["passed"] is False
    assert result["exit_code"] == 1
    (check,) = result["checks"]
    assert check["name"] == "completion pass_rate >= 0.80" and check["measured"] == 0.0
    assert check["limit"] == 0.8 and check["passed"] is False
    assert result["components"]["completion"]["pass_rate"]["value"] == 0.0


def test_compare_fail_on_and_component(
    experiments: tuple[str, str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    good, poor, db = experiments
    base = ["--component", "completion", *db]
    assert main(["compare", good, poor, "--component", "complet", *db]) == 2
    assert "unknown component 'complet'" in capsys.readouterr().err
    assert main(["compare", good, poor, *base]) == 0  # no --fail-on: a report
    printed = capsys.readouterr().out
    assert "verdict on completion: good is better" in printed  # configurations by name
    assert f"A good: experiment {good} · B poor: experiment {poor}" in printed  # ids second
    assert main(["compare", good, poor, "--fail-on", "regression", *base]) == 1
    assert "compare failed: verdict 'A better'" in capsys.readouterr().out
    assert main(["compare", poor, good, "--fail-on", "regression", *base]) == 0
    capsys.readouterr()
    assert main(["compare", poor, good, "--fail-on", "any", "--json", *base]) == 0
    result = _json(capsys)
    assert result["verdict"] == "B better" and result["a"] == poor and result["b"] == good
    assert (result["a_config"], result["b_config"]) == ("poor", "good")
    assert result["interval"]["n"] == 5


def test_compare_undecided_fails_only_any(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    one = asyncio.run(_experiment(settings, "one", "yes"))
    two = asyncio.run(_experiment(settings, "two", "yes"))
    base = [one, two, "--component", "completion", "--db", settings.db]
    assert main(["compare", *base, "--fail-on", "regression"]) == 0
    assert main(["compare", *base, "--fail-on", "any"]) == 1
    assert "undecided" in capsys.readouterr().out


def test_score_and_export_json(
    experiments: tuple[str, str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, _poor, db = experiments
    assert main(["score", "--experiment", good, "--quiet", "--json", *db]) == 0
    captured = capsys.readouterr()
    assert "rescored 10 of 10" in captured.err
    scored = orjson.loads(captured.out)
    assert (
        scored["experiment_id"] == good
        and scored["components"]["completion"]["mean"]["value"] == 1.0
    )
    out = tmp_path / "card.md"
    assert main(["export", "--experiment", good, "-o", str(out), "--json", *db]) == 0
    exported = _json(capsys)
    assert exported["output"] == str(out) and out.read_text().startswith("#")
    assert main(["export", "--experiment", good, "--json", *db]) == 2
    assert "--format json" in capsys.readouterr().err


NO_TOOLS = 'schema_version = 1\nname = "plain"\n[[tasks]]\nid = "a"\ninstruction = "hi"\n'


def _run(tmp_path: Path, agent: str, *extra: str) -> list[str]:
    suite = tmp_path / "plain.toml"
    suite.write_text(NO_TOOLS)
    return [
        "run", "--suite", str(suite), "--name", "x", "--agent", agent, "--trials", "2",
        "--db", str(tmp_path / "t.db"), "--port", "0", "--work-dir", str(tmp_path / "w"),
        "--quiet", *extra,
    ]  # fmt: skip


def test_run_checks_the_agent_command_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(tmp_path, "pyhton my_agent.py")) == 2
    err = capsys.readouterr().err
    assert "--agent: command 'pyhton' not found on PATH" in err
    assert not (tmp_path / "t.db").exists()  # nothing started, nothing created


def test_run_exits_1_when_runs_error_unless_tolerated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(tmp_path, "false", "--json")) == 1
    result = _json(capsys)
    assert result["statuses"] == {"errored": 2} and len(result["failed_runs"]) == 2
    assert result["exit_code"] == 1 and len(result["experiment_id"]) >= 8
    assert main(_run(tmp_path, "false", "--max-failed-runs", "2", "--json")) == 0
    tolerated = _json(capsys)
    assert tolerated["exit_code"] == 0 and tolerated["experiment_id"] != result["experiment_id"]
    assert main(_run(tmp_path, "echo hi")) == 0
