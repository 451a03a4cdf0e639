"""`tracecard experiment cancel` stops running cells' agents, not only queued cells (#21.4): a
real `tracecard worker` on PostgreSQL runs an agent that would sleep for minutes; the cancel
stops its process, and its run ends `aborted` / `cancelled`, unscored; the queued cell never
starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import stop
from tracecard.server.cli.main import main
from tracecard.traces import jobs
from tracecard.traces.store import Store

# Leaves its pid where the test can see it, then would run for 10 minutes.
AGENT = """
import os, pathlib, time
pids = pathlib.Path(os.environ["AGENT_PIDS"])
(pids / os.environ["TRACECARD_RUN_ID"]).write_text(str(os.getpid()))
time.sleep(600)
print("the answer is 42")
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is as good as gone
        return stat.read().split(")")[-1].split()[0] != "Z"


def _wait(condition: object, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _workers(store: Store) -> int:
    from sqlalchemy import text

    try:
        with store.engine.connect() as connection:
            return int(connection.execute(text("SELECT count(*) FROM job_workers")).scalar() or 0)
    except Exception:  # noqa: BLE001 - the table is not there before the worker's start
        return 0


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cancel_stops_a_running_agent_and_its_run_is_not_scored(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    pids = tmp_path / "pids"
    pids.mkdir()
    suite = tmp_path / "suite.json"
    tasks = [{"id": f"t{i}", "instruction": "say 42"} for i in range(2)]
    suite.write_text(json.dumps({"schema_version": 2, "name": "long", "tasks": tasks}))
    env = {**os.environ, "TRACECARD_JOBS_POLL_S": "0.05", "AGENT_PIDS": str(pids)}
    cli = [sys.executable, "-m", "tracecard.server.cli"]
    worker_argv = [*cli, "worker", "--db", pg_url, "--concurrency", "1", "--heartbeat", "0.5"]
    worker_argv += ["--work-dir", str(tmp_path / "worker")]
    run_argv = [*cli, "run", "--queue", "--db", pg_url, "--suite", str(suite), "--name", "long"]
    run_argv += ["--agent", f"{sys.executable} {agent}", "--timeout", "600", "--json"]
    run_argv += ["--follow-interval", "0.3", "--port", "0"]
    store = Store(pg_url)
    started: list[subprocess.Popen[str]] = []
    try:
        with open(tmp_path / "worker.log", "w") as log:
            started.append(
                subprocess.Popen(
                    worker_argv, cwd=tmp_path, env=env, stdout=log, stderr=log,
                    start_new_session=True,
                )  # fmt: skip
            )
        _wait(lambda: _workers(store) > 0, "the worker (it creates the jobs schema)")
        follower = subprocess.Popen(
            run_argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        started.append(follower)
        _wait(lambda: any(pids.iterdir()) or follower.poll() is not None, "the first agent")
        assert follower.poll() is None, follower.communicate()
        pid_file = next(pids.iterdir())
        run_id, pid = pid_file.name, int(pid_file.read_text())
        row = store.get_run(run_id)
        assert row is not None and row.experiment_id is not None
        experiment_id = row.experiment_id

        assert main(["experiment", "cancel", experiment_id, "--db", pg_url, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert len(plan["cancelled"]) == 2  # the running cell and the queued one
        cancelled_at = time.monotonic()
        _wait(lambda: not _alive(pid), "the running agent to be stopped", 60)
        stopped_in = time.monotonic() - cancelled_at

        out, err = follower.communicate(timeout=60)
        cells = jobs.experiment_cells(store, experiment_id)
        assert cells["counts"]["cancelled"] == 2, (cells["counts"], err)
        for cell in cells["cells"]:
            ended = store.get_run(cell["run_id"])
            assert ended is not None
            assert (ended.status, ended.end_reason) == ("aborted", "cancelled")
            assert not store.scores_for_runs([ended.id]).get(ended.id), "a cancelled run scored"
        assert [p.name for p in pids.iterdir()] == [run_id], "the queued cell's agent started"
        assert stopped_in < 30, f"the agent ran on for {stopped_in:.1f}s after the cancel"
        assert json.loads(out)["cells"]["cancelled"] == 2
    finally:
        for process in started:
            stop(process, 30)  # type: ignore[arg-type]
        store.dispose()
