"""A per-run upstream that never started is the infrastructure's failure, and every process sees
it (#21.4), provoked for real on PostgreSQL: the failure is written to the database when it
happens (tracecard.traces.infra_failures), not kept in the memory of the process that saw it.

1. Two `tracecard serve` replicas: an agent's calls reach one (its per-run upstreams' sandbox
   is missing, or their command exits at once), its finish reaches the other, which still ends
   each run errored with that reason, unscored.
2. A `tracecard worker` is killed (`kill -9`) after its agent met a missing sandbox: the worker
   that recovers the cell closes the lost attempt with `sandbox_failed` (the run was doomed
   before the worker died), not `worker_lost`; the cells API showed the failure meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import free_port, stop, wait_for_port
from tracecard.traces import infra_failures, jobs
from tracecard.traces.store import Store

ROOT = Path(__file__).resolve().parents[2]
TOOL_SERVER = ROOT / "tests" / "servers" / "tool_server.py"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "scripted", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}

# Calls the `files` upstream once (its sandbox cannot be made), says so in a marker file, then
# on its first attempt only waits to be killed with its worker.
AGENT = """
import json, os, pathlib, time, urllib.request
body = os.environ["INITIALIZE"].encode()
request = urllib.request.Request(os.environ["TRACECARD_UPSTREAM_FILES"], body,
    {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
try:
    urllib.request.urlopen(request, timeout=60).read()
except Exception as exc:
    print("the tool failed:", exc)
marker = pathlib.Path(os.environ["MARKER"])
first = not marker.exists()
marker.write_text(os.environ["TRACECARD_RUN_ID"])
if first:
    time.sleep(600)
print("the answer is 42")
"""


def _config(tmp_path: Path) -> Path:
    server = json.dumps([sys.executable, str(TOOL_SERVER), "stdio"])
    dead = json.dumps([sys.executable, "-c", "import sys; sys.exit(3)"])
    config = tmp_path / "tracecard.toml"
    config.write_text(
        f'sandbox_root = "{tmp_path / "sandboxes"}"\n'
        f'[upstreams.files]\ncommand = {server}\nper_run = true\nfixture = "missing"\n'
        f"[upstreams.dead]\ncommand = {dead}\nper_run = true\n"
        "[pool]\nenabled = false\n"
    )
    return config


def _tracecard(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tracecard.server.cli", *argv]


def _start(argv: list[str], tmp_path: Path, name: str, **env: str) -> subprocess.Popen[Any]:
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
    environ = {**os.environ, "TRACECARD_JOBS_POLL_S": "0.05", **env}
    return subprocess.Popen(
        argv, cwd=tmp_path, env=environ, stdout=log, stderr=log, start_new_session=True
    )


def _wait(condition: Any, what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_replica_that_did_not_serve_the_run_ends_it_with_the_failure(
    pg_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path)
    ports = [free_port(), free_port()]
    replicas = [
        _start(_tracecard("serve", "--db", pg_url, "--config", str(config), "--port", str(p)),
               tmp_path, f"serve{i}")
        for i, p in enumerate(ports)
    ]  # fmt: skip
    try:
        for port, process in zip(ports, replicas, strict=True):
            wait_for_port(port, timeout=120, proc=process)
        serving, finishing = (f"http://127.0.0.1:{p}" for p in ports)
        with httpx.Client(timeout=60) as http:
            ended = {}
            for upstream in ("files", "dead"):
                run = http.post(f"{serving}/api/runs", json={}).raise_for_status().json()
                answer = http.post(run["urls"][upstream], json=INITIALIZE, headers=MCP_HEADERS)
                assert answer.status_code >= 400 or "error" in answer.text, answer.text
                finish = http.post(
                    f"{finishing}/api/runs/{run['id']}/finish", json={"final_answer": "42"}
                )
                ended[upstream] = finish.raise_for_status().json()
        assert ended["files"]["status"] == ended["dead"]["status"] == "errored"
        assert ended["files"]["end_reason"] == "sandbox_failed"
        assert "sandbox could not be made" in ended["files"]["error"]
        assert ended["dead"]["end_reason"] == "upstream_never_started"
        assert ended["dead"]["error"].startswith("upstream_never_started: ")
    finally:
        for process in replicas:
            stop(process, 30)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_worker_that_recovers_the_cell_sees_the_failure_of_the_one_that_died(
    pg_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    marker = tmp_path / "marker"
    suite = tmp_path / "suite.json"
    tasks = [
        {"id": "t-files", "instruction": "say 42", "completion": {"checks": [{"contains": "42"}]}}
    ]
    suite.write_text(json.dumps({"schema_version": 2, "name": "doomed", "tasks": tasks}))
    worker = ["worker", "--db", pg_url, "--config", str(config), "--concurrency", "1"]
    worker += ["--heartbeat", "0.3", "--lost-after", "2"]
    agent_env = {"MARKER": str(marker), "INITIALIZE": json.dumps(INITIALIZE)}
    store = Store(pg_url)
    started: list[subprocess.Popen[Any]] = []
    try:
        first = _start(_tracecard(*worker, "--work-dir", str(tmp_path / "a")), tmp_path, "a",
                       **agent_env)  # fmt: skip
        started.append(first)
        run = _tracecard("run", "--queue", "--db", pg_url, "--config", str(config), "--port", "0")
        run += ["--suite", str(suite), "--name", "doomed", "--json", "--follow-interval", "0.3"]
        run += ["--agent", f"{sys.executable} {agent}", "--timeout", "120"]
        following = subprocess.Popen(
            run, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
            env={**os.environ, "TRACECARD_JOBS_POLL_S": "0.05"},
        )  # fmt: skip
        started.append(following)
        _wait(marker.exists, "the first attempt's agent to meet the missing sandbox")
        lost_run = marker.read_text()
        assert infra_failures.of_run(store, lost_run) is not None  # written by worker a

        experiment = store.get_run(lost_run)
        assert experiment is not None and experiment.experiment_id is not None
        cells = jobs.experiment_cells(store, experiment.experiment_id)["cells"]
        (attempt,) = cells[0]["attempts"]  # seen while the attempt still runs
        assert attempt["state"] == "running"
        assert attempt["infra"]["reason"] == "sandbox_failed"

        os.killpg(first.pid, signal.SIGKILL)  # worker a and its agent
        first.wait(30)
        started.append(_start(_tracecard(*worker, "--work-dir", str(tmp_path / "b")), tmp_path,
                              "b", **agent_env))  # fmt: skip
        out, err = following.communicate(timeout=240)
        assert following.returncode == 3, err  # the infrastructure failed: exit 3
        assert json.loads(out)["cells"]["infra"] == 1

        lost = store.get_run(lost_run)
        assert lost is not None and lost.status == "errored"
        assert lost.end_reason == "sandbox_failed", lost.error
        assert lost.error is not None and "then the worker" in lost.error
        attempts = jobs.cell_attempts(store, experiment.experiment_id)[("t-files", 0)]
        assert [a["state"] for a in attempts] == ["lost", "ended"]
        assert [a["end_reason"] for a in attempts] == ["sandbox_failed", "sandbox_failed"]
    finally:
        for process in started:
            if process.poll() is None:
                stop(process, 30)
        store.dispose()
