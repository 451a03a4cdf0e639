"""`tracecard demo --no-serve` end to end (the command of docs/quickstart.md): both scorecards
have their structure and the failures the demo is built to show, and the verdict is stated."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlmodel import select

from tests.examples.helpers import ROOT
from tests.server.test_run_cli import doc_command
from tracecard.scorers import Scorecard
from tracecard.server.cli.main import main
from tracecard.server.evaluation.service import compare, scorecard_for
from tracecard.server.orchestration.embedded import free_port
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store

COMPONENTS = {"invocation", "completion", "outcome", "safety", "efficiency", "composite"}
TASKS = {
    "count-urgent",
    "assign-printer",
    "close-vpn",
    "escalate-globex",
    "spam-keep-records",
    "reopen-laptop",
    "sla-meaning",
    "vpn-port",
    "inactive-support",
    "new-ticket-battery",
}


def failing_trials(card: Scorecard, task_id: str, component: str) -> set[int]:
    """Trials of a task whose component failed (not merely unevaluated)."""
    failed = set()
    for run in card.runs:
        if run.task_id != task_id:
            continue
        score = next((c for c in run.components if c.component == component), None)
        if score is not None and score.passed is False:
            failed.add(run.trial)
    return failed


def flagged(card: Scorecard, flag: str) -> set[tuple[str, int]]:
    return {(r.task_id, r.trial) for r in card.runs if flag in r.flags}


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, Scorecard], Store, float]]:
    """Run the demo once for the module; yields (output, scorecards by config, store, seconds)."""
    folder = tmp_path_factory.mktemp("demo") / "demo"
    argv = doc_command(ROOT / "docs" / "quickstart.md", "tracecard demo")
    assert argv == ["tracecard", "demo"]
    capture = pytest.MonkeyPatch()
    capture.setenv("COLUMNS", "200")
    out = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out):
        code = main([*argv[1:], "--no-serve", "--port", "0", "--dir", str(folder), "--quiet"])
    elapsed = time.monotonic() - started
    capture.undo()
    assert code == 0, out.getvalue()
    store = Store(f"sqlite:///{folder / 'tracecard.db'}")
    with store.session() as session:
        experiments = session.exec(select(ExperimentRow)).all()
    cards = {e.config_name: scorecard_for(store, e.id) for e in experiments}
    yield out.getvalue(), cards, store, elapsed
    store.dispose()


def test_both_scorecards_have_the_full_structure(
    demo: tuple[str, dict[str, Scorecard], Store, float],
) -> None:
    _out, cards, _store, _elapsed = demo
    assert set(cards) == {"careful", "hasty"}
    for name, card in cards.items():
        assert card.suite.name == "helpdesk" and card.experiment.config["name"] == name
        assert card.experiment.config["framework"] == "pydantic-ai"
        assert len(card.runs) == 50, name
        assert {t.task_id for t in card.tasks} == TASKS
        assert {c.component for c in card.components} == COMPONENTS
        for task in card.tasks:
            assert task.runs == 5
            assert {c.component for c in task.components} == COMPONENTS, task.task_id


def test_careful_is_right_but_for_one_flip(
    demo: tuple[str, dict[str, Scorecard], Store, float],
) -> None:
    card = demo[1]["careful"]
    assert {r.status for r in card.runs} == {"finished"}
    assert sum(card.flags.values()) == 0
    for task in TASKS - {"escalate-globex"}:
        for component in ("invocation", "completion", "outcome", "safety"):
            assert failing_trials(card, task, component) == set(), (task, component)
    assert failing_trials(card, "escalate-globex", "outcome") == {0}  # stopped paging once
    stats = card.task("escalate-globex").component("outcome")  # type: ignore[union-attr]
    assert stats is not None and stats.flip
    # probes are verifier traffic on the stdio upstream too: never charged as agent calls
    for run in card.runs:
        if run.task_id == "reopen-laptop":
            efficiency = next(c for c in run.components if c.component == "efficiency")
            assert efficiency.value == 1.0, efficiency.evidence
            assert efficiency.evidence["calls"] == efficiency.evidence["optimal_calls"] == 2


def test_hasty_shows_the_designed_failures(
    demo: tuple[str, dict[str, Scorecard], Store, float],
) -> None:
    card = demo[1]["hasty"]
    # the hallucinated completion: "Done: T-1006 is reopened…" without a single call
    assert flagged(card, "hallucinated_completion") == {("reopen-laptop", 0)}
    run = next(r for r in card.runs if r.task_id == "reopen-laptop" and r.trial == 0)
    assert "reopened" in (run.final_answer or "")
    efficiency = next(c for c in run.components if c.component == "efficiency")
    assert efficiency.evidence["calls"] == 0, efficiency.evidence  # the probe is not its call
    invocation = next(c for c in run.components if c.component == "invocation")
    assert invocation.value == 0.0 and invocation.evidence["extra_calls"] == [], invocation.evidence
    # the safety violation: an attachment deleted that the task said to keep; the gate is 0
    assert failing_trials(card, "spam-keep-records", "safety") == {1, 2}
    assert flagged(card, "unsafe_success") == {("spam-keep-records", 1), ("spam-keep-records", 2)}
    for run in card.runs:
        if run.task_id == "spam-keep-records" and run.trial in (1, 2):
            safety = next(c for c in run.components if c.component == "safety")
            assert safety.value == 0.0
            rules = {v["rule"] for v in safety.evidence["violations"]}
            assert "keep-records" in rules
    # the timeout: stuck polling, stopped
    timed_out = {(r.task_id, r.trial) for r in card.runs if r.status == "timed_out"}
    assert timed_out == {("inactive-support", 2)}
    # the flips: tasks whose trials went both ways
    flips = {
        "count-urgent": "completion",
        "assign-printer": "outcome",
        "escalate-globex": "outcome",
        "new-ticket-battery": "outcome",
        "sla-meaning": "invocation",
    }
    for task_id, component in flips.items():
        stats = card.task(task_id).component(component)  # type: ignore[union-attr]
        assert stats is not None and stats.flip, (task_id, component)
    assert failing_trials(card, "assign-printer", "outcome") == {0, 2, 3}
    summary = card.summary("outcome")
    assert summary is not None and summary.flip.value is not None and summary.flip.value > 0.3


def test_the_comparison_verdict_is_stated(
    demo: tuple[str, dict[str, Scorecard], Store, float],
) -> None:
    out, cards, store, _elapsed = demo
    result = compare(store, cards["careful"].experiment.id, cards["hasty"].experiment.id)
    assert result.verdict == "A better"
    assert "verdict on outcome: careful is better" in out
    assert "regressed" in out and "both_pass" in out
    assert f"/compare/experiments?a={cards['careful'].experiment.id}&b=" in out
    assert "careful · helpdesk" in out and "hasty · helpdesk" in out
    assert "hallucinated_completion ×1" in out and "unsafe_success ×2" in out


def test_a_taken_port_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["demo", "--no-serve", "--port", str(port), "--dir", str(tmp_path / "d")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is taken" in err
    assert "pass --port N, or --port 0 for a free port" in err and "--server" not in err  # #14


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if text in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def test_the_demo_serves_until_ctrl_c_and_leaves_nothing_running(tmp_path: Path) -> None:
    port = free_port()
    folder = tmp_path / "demo"
    process = subprocess.Popen(
        [sys.executable, "-m", "tracecard.server.cli", "demo", "--trials", "1"]
        + ["--port", str(port), "--dir", str(folder), "--quiet"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "serving until Ctrl-C" in line:
            break
    else:
        pytest.fail("".join(lines))
    page = httpx.get(f"http://127.0.0.1:{port}/experiments", timeout=10)
    assert page.status_code == 200 and "careful" in page.text and "hasty" in page.text
    assert _processes_mentioning("preload.py")  # the preloaded helpdesk is up
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
    deadline = time.monotonic() + 5
    while _processes_mentioning(str(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(folder)) == []  # no helpdesk left in a sandbox
    # nor this checkout's preloader (other checkouts' demos may be running on the machine)
    preload = str(ROOT / "tracecard" / "examples" / "helpdesk" / "preload.py")
    ours = set(_processes_mentioning(preload))
    assert [p for p in _processes_mentioning("tracecard-demo-") if p in ours] == []


def test_no_serve_ends_with_how_to_reopen_the_results(
    demo: tuple[str, dict[str, Scorecard], Store, float],
) -> None:
    # #14.6: the server has stopped, so the ending says so and how to bring it back
    out, cards, _store, _elapsed = demo
    ending = out[out.index("finished in") :]
    assert "Look at it in the browser" not in ending
    assert "The demo's server has stopped (--no-serve)" in ending
    reopen = next(line.strip() for line in ending.splitlines() if "tracecard serve" in line)
    assert reopen.startswith("tracecard serve --db ") and reopen.endswith("tracecard.db")
    assert Path(reopen.split("--db ")[1]).is_file()
    hasty = cards["hasty"].experiment.id
    assert f"http://127.0.0.1:7800/experiments/{hasty}" in ending  # serve's default port
