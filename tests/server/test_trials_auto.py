"""`tracecard run --trials auto --baseline EXP`: rounds of one trial per task until the paired
comparison with the baseline is decided (or --max-trials), with real agent commands (Python
one-liners answering through the environment contract) and an embedded tracecard."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tracecard.server.cli.main import main
from tracecard.traces import queries
from tracecard.traces.store import Store

SUITE = "schema_version = 1\nname = 'answers'\n" + "".join(
    f'[[tasks]]\nid = "t{i}"\ninstruction = "say ok"\n'
    '[tasks.completion]\nchecks = [{ contains = "ok" }]\n'
    for i in range(6)
)


def _agent(answer: str) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(f'print({answer!r})')}"


@pytest.fixture
def workspace(tmp_path: Path) -> list[str]:
    (tmp_path / "suite.toml").write_text(SUITE, encoding="utf-8")
    (tmp_path / "tracecard.toml").write_text("", encoding="utf-8")
    return [
        "--suite", str(tmp_path / "suite.toml"), "--config", str(tmp_path / "tracecard.toml"),
        "--db", str(tmp_path / "t.db"), "--port", "0", "--work-dir", str(tmp_path / "w"),
        "--quiet", "--json",
    ]  # fmt: skip


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["run", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_rounds_stop_when_decided_and_at_the_cap(
    workspace: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, baseline, _ = _run(capsys, *workspace, "--name", "wrong", "--agent", _agent("nope"))
    assert code == 0 and baseline["runs"] == 6
    auto = [
        "--trials",
        "auto",
        "--baseline",
        baseline["experiment_id"],
        "--component",
        "completion",
    ]
    # every task better: decided after the first round
    code, better, err = _run(
        capsys, *workspace, *auto, "--max-trials", "4", "--name", "right", "--agent", _agent("ok")
    )
    assert code == 0 and better["runs"] == 6
    assert "round 1 of at most 4: B better" in err
    assert "trials until decided: B better on completion after 1 trial(s) per task" in err
    # no difference: undecided until --max-trials rounds have run, each one trial per task
    code, same, err = _run(
        capsys, *workspace, *auto, "--max-trials", "3", "--name", "same", "--agent", _agent("nope")
    )
    assert code == 0 and same["runs"] == 18 and same["statuses"] == {"finished": 18}
    assert "round 3 of at most 3: undecided" in err
    assert "(--max-trials 3 reached)" in err
    # The experiment rows record the trials that ran (the experiment page, the compare
    # estimate's k and a replay's trial check read them), not the first round's 1.
    store = Store(workspace[workspace.index("--db") + 1])
    trials = {
        e: row.trials
        for e in (baseline["experiment_id"], better["experiment_id"], same["experiment_id"])
        if (row := queries.get_experiment(store, e)) is not None
    }
    store.dispose()
    assert list(trials.values()) == [1, 1, 3]


def test_auto_needs_a_baseline(workspace: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", *workspace, "--trials", "auto", "--name", "x", "--agent", _agent("ok")])
    assert code == 2
    assert "--trials auto needs --baseline" in capsys.readouterr().err
