"""`tracecard run` end to end: the commands of docs/quickstart.md and docs/agents.md as written
(a pydantic-ai agent and a minimal MCP-client agent, as real commands reading the environment),
bad input, the printed summary, and Ctrl-C."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.examples.helpers import ROOT, code_blocks
from tests.server.test_orchestrator import FAULT_AGENT, alive, recorded_pids
from tests.support.processes import ctrl_c_reaches_it
from tests.support.tracecard import running_tracecard
from tracecard.server.cli.demo import preloaded_helpdesk
from tracecard.server.cli.main import main
from tracecard.server.evaluation.service import experiment_with_runs
from tracecard.server.settings import Settings
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store

VENV_BIN = str(Path(sys.executable).parent)


def doc_command(markdown: Path, starts: str) -> list[str]:
    """The first `sh` block line (with continuations) that starts with `starts`, split."""
    for block in code_blocks(markdown, "sh"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            if line.strip().startswith(starts):
                return shlex.split(line)
    raise AssertionError(f"no `{starts}` command in {markdown}")


def run_tracecard(
    argv: list[str], tmp_path: Path, extra: list[str]
) -> subprocess.CompletedProcess[str]:
    """Run a documented `tracecard ...` command from the repository root, with the virtualenv
    first on PATH (as if activated) and the data in tmp_path. The helpdesk's per-run processes
    relay to a preloaded helpdesk (as in the demo): the same server, a CPU-second less per run."""
    assert argv[0] == "tracecard"
    with preloaded_helpdesk() as preloaded:
        env = {
            **os.environ,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "TRACECARD_SANDBOX_ROOT": str(tmp_path / "sandboxes"),
            "COLUMNS": "160",
            "HELPDESK_PRELOADED": preloaded or "",
        }
        return subprocess.run(
            [sys.executable, "-m", "tracecard.server.cli", *argv[1:], *extra],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )


def only_experiment(db: Path) -> tuple[ExperimentRow, list]:  # type: ignore[type-arg]
    store = Store(f"sqlite:///{db}")
    try:
        with store.session() as session:
            from sqlmodel import select

            (experiment,) = session.exec(select(ExperimentRow)).all()
        return experiment_with_runs(store, experiment.id)
    finally:
        store.dispose()


def test_quickstart_run_scores_a_pydantic_ai_agent_command(tmp_path: Path) -> None:
    argv = doc_command(ROOT / "docs" / "quickstart.md", "tracecard run")
    assert "examples/agents/helpdesk_agent.py" in " ".join(argv)
    extra = ["--db", str(tmp_path / "t.db"), "--port", "0", "--work-dir", str(tmp_path / "w")]
    result = run_tracecard(argv, tmp_path, [*extra, "--quiet"])
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "careful · helpdesk" in out and "pass_rate (10 runs)" in out and "95% CI" in out
    assert "mean " in out  # the mean is labelled as such
    assert "runs: 10 finished" in out
    assert "viewer: http://127.0.0.1:" in out
    assert f"database: {tmp_path / 't.db'} (later commands: tracecard export --experiment " in out
    experiment, runs = only_experiment(tmp_path / "t.db")
    assert experiment.config_name == "careful"
    assert experiment.config["agent"].startswith("python examples/agents/helpdesk_agent.py")
    assert {r.task_id for r in runs} == {
        "count-urgent", "assign-printer", "close-vpn", "escalate-globex", "spam-keep-records",
        "reopen-laptop", "sla-meaning", "vpn-port", "inactive-support", "new-ticket-battery",
    }  # fmt: skip
    store = Store(f"sqlite:///{tmp_path / 't.db'}")
    scores = store.scores_for_runs([r.id for r in runs])
    store.dispose()
    by_task = {r.task_id: {s.component: s for s in scores[r.id]} for r in runs}
    assert by_task["vpn-port"]["completion"].passed is True
    assert by_task["assign-printer"]["outcome"].passed is True  # a file probe on state.json
    assert by_task["new-ticket-battery"]["outcome"].passed is True  # a tool probe
    assert by_task["sla-meaning"]["invocation"].passed is True  # no call: abstention
    assert by_task["escalate-globex"]["outcome"].passed is False  # careful's one flip: trial 0
    assert all(r.final_answer for r in runs)
    answers = list((tmp_path / "w").glob("*/*/answer.txt"))
    assert len(answers) == 10


def test_agents_doc_minimal_agent_runs_as_written(tmp_path: Path) -> None:
    (agent,) = code_blocks(ROOT / "docs" / "agents.md", "python")
    (tmp_path / "my_agent.py").write_text(agent)
    argv = doc_command(ROOT / "docs" / "agents.md", "tracecard run --config")
    assert "python my_agent.py" in argv
    argv = [a.replace("my_agent.py", str(tmp_path / "my_agent.py")) for a in argv]
    extra = ["--db", str(tmp_path / "t.db"), "--port", "0", "--work-dir", str(tmp_path / "w")]
    result = run_tracecard(argv, tmp_path, [*extra, "--quiet"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "one-trick · helpdesk" in result.stdout
    _experiment, runs = only_experiment(tmp_path / "t.db")
    assert all(r.status == "finished" for r in runs)
    vpn = next(r for r in runs if r.task_id == "vpn-port")
    assert vpn.final_answer == "The VPN uses UDP port 1194."
    stdout = next((tmp_path / "w").glob(f"*/{vpn.id}/stdout.txt")).read_text()
    assert stdout.startswith("instruction: According to the VPN runbook")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "no/such/suite.toml"], "--suite no/such/suite.toml: no such file"),
        (["--agent", ""], "--agent is empty"),
        (["--agent", "python 'unclosed"], "cannot split"),
        (["--trials", "0"], "--trials and --concurrency must be at least 1"),
        (["--server", "http://127.0.0.1:9"], "cannot reach"),
        (["--meta", "novalue"], "--meta takes KEY=VALUE"),
    ],
)
def test_bad_input_is_reported_without_a_traceback(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = ROOT / "examples" / "helpdesk" / "suite.toml"
    base = {"--suite": str(suite), "--name": "x", "--agent": "true", "--trials": "1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["run", *[p for pair in base.items() for p in pair]]
    argv += ["--db", str(tmp_path / "t.db"), "--port", "0", "--work-dir", str(tmp_path / "w")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_suite_whose_upstream_is_not_configured_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = ROOT / "examples" / "helpdesk" / "suite.toml"
    argv = ["run", "--suite", str(suite), "--name", "x", "--agent", "true"]
    argv += ["--db", str(tmp_path / "t.db"), "--port", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "helpdesk" in err and "does not configure" in err
    assert err.rstrip().endswith(  # #14: a clone's root has no tracecard.toml of its own
        "add [upstreams.helpdesk] to tracecard.toml (none was loaded: pass --config PATH)"
    )


INTERRUPT_SUITE = {
    "schema_version": 1,
    "name": "interrupt",
    "tasks": [
        {"id": t, "instruction": t, "completion": {"checks": [{"contains": "42"}]}}
        for t in ("ok", "crash", "hang", "stubborn")
    ],
}


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_summary_and_ctrl_c(stop: signal.Signals, settings: Settings, tmp_path: Path) -> None:
    agent = tmp_path / "fault_agent.py"
    agent.write_text(FAULT_AGENT)
    suite = tmp_path / "interrupt.json"
    suite.write_text(json.dumps(INTERRUPT_SUITE))
    work = tmp_path / "work"
    with running_tracecard(settings) as server:
        argv = [sys.executable, "-m", "tracecard.server.cli", "run", "--server", server.url]
        argv += ["--suite", str(suite), "--name", "interrupted", "--trials", "1"]
        argv += ["--agent", f"{sys.executable} {agent}", "--concurrency", "4"]
        argv += ["--timeout", "120", "--grace", "0.5", "--work-dir", str(work), "--quiet"]
        process = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "COLUMNS": "200"},
            preexec_fn=ctrl_c_reaches_it,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (ended(settings) == 2 and len(cli_pids(work)) >= 5):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the quick runs did not end"
            time.sleep(0.1)
        process.send_signal(stop)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert "interrupted: kept the finished runs, aborted 2" in out
        assert "exited with code 3" in out and "ValueError: boom" in out, out  # the reason
        assert f"viewer: {server.url}/experiments/" in out
        experiment_id = out.split("experiment ", 1)[1].split(":", 1)[0].strip()
        runs = {r["task_id"]: r for r in server_runs(server.url, experiment_id)}
    assert runs["ok"]["status"] == "finished"
    assert runs["crash"]["status"] == "errored"
    assert runs["hang"]["status"] == "aborted" and runs["stubborn"]["status"] == "aborted"
    leftover = [pid for pid in cli_pids(work) if alive(pid)]
    assert leftover == [], (out, err)


def cli_pids(work: Path) -> list[int]:
    """The pids the fault agents recorded under `tracecard run`'s work dir (per experiment)."""
    return [pid for folder in work.glob("*") for pid in recorded_pids(folder)]


def ended(settings: Settings) -> int:
    """Runs of the server's experiments that have ended (read from its database)."""
    store = Store(settings.db)
    try:
        with store.session() as session:
            from sqlmodel import col, select

            from tracecard.traces.models import RunRow

            query = select(RunRow).where(col(RunRow.status).in_(["finished", "errored"]))
            return len(session.exec(query).all())
    finally:
        store.dispose()


def server_runs(url: str, experiment_id: str) -> list[dict]:  # type: ignore[type-arg]
    import httpx

    body = httpx.get(f"{url}/api/experiments/{experiment_id}", timeout=10).json()
    return list(body["runs"])
