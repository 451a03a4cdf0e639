"""Infrastructure failures are counted apart from the agent's (#21.4), provoked for real: a per-run
upstream whose fixture is missing (`sandbox_failed`) and one whose command exits at once
(`upstream_never_started`), under plain `tracecard run` on SQLite (the same cell jobs as the
workers). Their runs end errored with that reason, unscored; the run exits 3; the cells are
`infra`; the scorecard counts them apart. Then the fixture is put back and `experiment rerun
--cells infra` on a real `tracecard worker` runs those cells again: the scorecard uses each
cell's latest completed attempt and says which (JSON and Markdown)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import stop
from tracecard.scorers.writers import read_scorecard_json, to_json, to_markdown
from tracecard.server.cli.main import main
from tracecard.traces import jobs
from tracecard.traces.store import Store

ROOT = Path(__file__).resolve().parents[2]
TOOL_SERVER = ROOT / "tests" / "servers" / "tool_server.py"

# Calls its task's upstream once (an MCP `initialize` through the proxy), whatever it answers,
# then answers: an agent that would pass were it not for the infrastructure.
AGENT = """
import json, os, urllib.request
task = os.environ["TRACECARD_TASK_ID"]
url = {"t-files": os.environ.get("TRACECARD_UPSTREAM_FILES"),
       "t-dead": os.environ.get("TRACECARD_UPSTREAM_DEAD")}.get(task)
if url:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "scripted", "version": "1"}}}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json",
                                                 "Accept": "application/json, text/event-stream"})
    try:
        urllib.request.urlopen(request, timeout=60).read()
    except Exception as exc:
        print("the tool failed:", exc)
print("the answer is 42")
"""

SUITE = {
    "schema_version": 2,
    "name": "infra",
    "tasks": [
        {"id": task, "instruction": "say 42", "completion": {"checks": [{"contains": "42"}]}}
        for task in ("t-files", "t-dead", "t-ok")
    ],
}


def _workspace(tmp_path: Path) -> dict[str, Any]:
    server = json.dumps([sys.executable, str(TOOL_SERVER), "stdio"])
    dead = json.dumps([sys.executable, "-c", "import sys; sys.exit(3)"])
    config = tmp_path / "tracecard.toml"
    config.write_text(
        f'sandbox_root = "{tmp_path / "sandboxes"}"\n'
        f"[upstreams.files]\ncommand = {server}\nper_run = true\nfixture = \"fixture\"\n"
        f"[upstreams.dead]\ncommand = {dead}\nper_run = true\n"
        "[pool]\nenabled = false\n"  # the same with it on, twice the time (warm starts)
    )
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps(SUITE))
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    return {
        "config": str(config),
        "suite": str(suite),
        "agent": f"{sys.executable} {agent}",
        "db": str(tmp_path / "t.db"),
    }


def _card(store: Store, experiment_id: str) -> Any:
    from tracecard.scorers.stored import scorecard_of
    from tracecard.traces.experiments import stored_experiment
    from tracecard.traces.queries import get_experiment

    experiment = get_experiment(store, experiment_id)
    assert experiment is not None
    return scorecard_of(stored_experiment(store, experiment), resamples=50)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sandbox_and_upstream_failures_are_infra_then_a_rerun_is_the_scored_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = _workspace(tmp_path)
    run = ["run", "--db", space["db"], "--config", space["config"], "--suite", space["suite"]]
    run += ["--agent", space["agent"], "--name", "infra", "--port", "0", "--quiet", "--json"]
    run += ["--work-dir", str(tmp_path / "work"), "--timeout", "60"]
    code = main(run)
    summary = json.loads(capsys.readouterr().out)
    assert code == 3, summary  # the infrastructure, not the agent: not an answer
    assert summary["exit_code"] == 3 and summary["failed_runs"] == []
    reasons = {r["task_id"]: r["end_reason"] for r in summary["infra_runs"]}
    assert reasons == {"t-files": "sandbox_failed", "t-dead": "upstream_never_started"}
    experiment_id = summary["experiment_id"]

    store = Store(space["db"])
    try:
        cells = jobs.experiment_cells(store, experiment_id)
        assert cells["counts"]["infra"] == 2 and cells["counts"]["done"] == 1, cells["counts"]
        for run_id in (c["run_id"] for c in cells["cells"] if c["state"] == "infra"):
            row = store.get_run(run_id)
            assert row is not None and row.status == "errored"
            assert row.error is not None and row.error.startswith(f"{row.end_reason}: ")
            assert not store.scores_for_runs([run_id]).get(run_id), "an infra failure scored"
        dead = next(c for c in cells["cells"] if c["task_id"] == "t-dead")
        assert "exited" in (store.get_run(dead["run_id"]).error or "")  # type: ignore[union-attr]

        card = _card(store, experiment_id)
        assert [r.task_id for r in card.runs] == ["t-ok"]  # only what the agent did is scored
        assert card.infra is not None
        assert card.infra.attempts == {"sandbox_failed": 1, "upstream_never_started": 1}
        assert card.infra.cells == ["t-dead#0", "t-files#0"]
        assert read_scorecard_json(to_json(card)) == card
        markdown = to_markdown(card)
        assert "1 sandbox_failed, 1 upstream_never_started attempt(s)" in markdown
        assert "2 cell(s) with no completed attempt" in markdown

        # the fixture is back: the infra cells again, as new attempts, on a real worker
        (tmp_path / "fixture").mkdir()
        (tmp_path / "fixture" / "notes.txt").write_text("hello")
        rerun = ["experiment", "rerun", experiment_id, "--db", space["db"], "--cells", "infra"]
        rerun += ["--config", space["config"], "--agent", space["agent"], "--json"]
        assert main(rerun) == 0
        plan = json.loads(capsys.readouterr().out)
        assert len(plan["enqueued"]) == 2
        _with_worker(tmp_path, space, lambda: _ended(store, experiment_id))

        cells = jobs.experiment_cells(store, experiment_id)
        files = next(c for c in cells["cells"] if c["task_id"] == "t-files")
        assert files["state"] == "done" and len(files["attempts"]) == 2
        dead = next(c for c in cells["cells"] if c["task_id"] == "t-dead")
        assert dead["state"] == "infra"  # its command still exits at once
        card = _card(store, experiment_id)
        scored = {r.task_id: r.attempt for r in card.runs}
        assert scored == {"t-ok": 1, "t-files": 2}, scored
        assert card.infra is not None and card.infra.cells == ["t-dead#0"]
        assert card.infra.attempts == {"sandbox_failed": 1, "upstream_never_started": 2}
        document = json.loads(to_json(card))
        assert document["schema_version"] == 3
        assert {r["task_id"]: r["attempt"] for r in document["runs"]} == scored
        markdown = to_markdown(card)
        assert "1 scored run(s) are a later attempt: t-files#0 (attempt 2)" in markdown
    finally:
        store.dispose()


def _ended(store: Store, experiment_id: str) -> bool:
    counts = jobs.experiment_cells(store, experiment_id)["counts"]
    return counts["queued"] == 0 and counts["running"] == 0


def _with_worker(tmp_path: Path, space: dict[str, Any], done: Any) -> None:
    argv = [sys.executable, "-m", "tracecard.server.cli", "worker", "--db", space["db"]]
    argv += ["--config", space["config"], "--concurrency", "2", "--heartbeat", "0.5"]
    argv += ["--work-dir", str(tmp_path / "worker")]
    env = {**os.environ, "TRACECARD_JOBS_POLL_S": "0.05"}
    with open(tmp_path / "worker.log", "w") as log:
        worker = subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=log, stderr=log, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 240
            while not done():
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                time.sleep(0.2)
        finally:
            stop(worker, 30)  # type: ignore[arg-type]
