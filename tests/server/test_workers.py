"""Trials as durable jobs across machines (issue #21): real `tracecard worker` and `tracecard
serve` processes on a real PostgreSQL, a scripted agent, `kill -9` for real.

One journey, to keep CI time down: 8 cells under `[limits.model.model] concurrency = 2` on 3
workers never have more than 2 model requests at once; then 20 tasks x 3 trials on 3 workers
with one killed mid-run: every cell ends exactly once, each lost attempt is `worker_lost` and
unscored, the scores equal a single-machine run's; then every worker killed mid-experiment,
and a new worker with `tracecard experiment resume` finishes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.scripted_model import ScriptedModel
from tracecard.server.cli.main import main
from tracecard.server.orchestration.embedded import free_port
from tracecard.traces.store import Store

ROOT = Path(__file__).resolve().parents[2]
TASKS = 20

# A fast scripted agent: its answer depends on the task only (so every trial scores alike);
# with a model upstream it asks the model once. AGENT_SLEEP keeps it running long enough to be
# killed mid-run.
AGENT = """
import json, os, sys, time, urllib.request
task = os.environ["TRACECARD_TASK_ID"]
base = os.environ.get("OPENAI_BASE_URL")
if base:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": task}]}).encode()
    request = urllib.request.Request(base + "/chat/completions", body,
                                     {"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()
time.sleep(float(os.environ.get("AGENT_SLEEP", "0")))
number = int(task[1:])
print("the answer is 42" if number % 3 else "no idea")
"""


def _suite(path: Path, count: int = TASKS) -> Path:
    tasks = [
        {
            "id": f"t{i:02d}",
            "instruction": f"task {i}",
            "completion": {"checks": [{"contains": "42"}]},
        }
        for i in range(count)
    ]
    path.write_text(json.dumps({"schema_version": 2, "name": path.stem, "tasks": tasks}))
    return path


def _config(path: Path, model_url: str, limit: int | None) -> Path:
    text = f'[upstreams.model]\nurl = "{model_url}"\nkind = "openai"\n'
    if limit is not None:
        text += f"\n[limits.model.model]\nconcurrency = {limit}\n"
    path.write_text(text)
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "TRACECARD_SANDBOX_ROOT": str(tmp_path / "sandboxes"),
        "TRACECARD_JOBS_POLL_S": "0.05",
        "COLUMNS": "200",
        **extra,
    }


def _tracecard(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tracecard.server.cli", *argv]


@contextmanager
def _processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
        for process in started:
            process.wait(30)


def _worker(
    started: list[subprocess.Popen[str]], db: str, config: Path, tmp_path: Path, name: str
) -> subprocess.Popen[str]:
    argv = _tracecard("worker", "--db", db, "--config", str(config), "--concurrency", "4")
    argv += ["--heartbeat", "0.5", "--lost-after", "5", "--work-dir", str(tmp_path / name)]
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        argv, cwd=tmp_path, env=_env(tmp_path, AGENT_SLEEP="0.3"), stdout=log, stderr=log,
        text=True,
    )  # fmt: skip
    started.append(process)
    return process


def _wait(condition: Any, what: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _rows(store: Store, sql: str, **params: Any) -> list[Any]:
    from sqlalchemy import text

    with store.engine.connect() as connection:
        return list(connection.execute(text(sql), params))


def _cells(url: str, experiment_id: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/api/experiments/{experiment_id}/cells", timeout=30)
    response.raise_for_status()
    return dict(response.json())


def _per_task(card: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {
        (task["task_id"], c["component"]): (c.get("pass_rate"), c.get("mean"))
        for task in card["tasks"]
        for c in task["components"]
    }


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(600)  # tracecard processes start; at load 30 that alone took minutes
def test_cells_on_three_workers_survive_kill_9_and_resume(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel(pause_s=0.4)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    agent_command = f"{sys.executable} -S {agent}"  # the standard library only: no site start
    suite = _suite(tmp_path / "suite.json")
    plain = _config(tmp_path / "plain.toml", model.url, None)
    own_model = ScriptedModel(pause_s=0.4)  # the single-machine run's: not counted in 1.
    alone_config = _config(tmp_path / "alone.toml", own_model.url, None)
    limited = _config(tmp_path / "limited.toml", model.url, 2)
    store = Store(pg_url)
    port = free_port()
    serve_url = f"http://127.0.0.1:{port}"
    try:
        with _processes() as started:
            serve = subprocess.Popen(
                _tracecard("serve", "--db", pg_url, "--config", str(plain), "--port", str(port)),
                cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            started.append(serve)
            workers = [_worker(started, pg_url, limited, tmp_path, f"w{i}") for i in range(3)]
            # the single-machine run of the same cells (compared in 2.) goes on meanwhile: it
            # shares nothing with the workers (its own SQLite, embedded server and agents)
            single = _tracecard("run", "--db", str(tmp_path / "one.db"), "--port", "0")
            single += ["--config", str(alone_config), "--suite", str(suite), "--name", "one"]
            single += ["--trials", "3", "--agent", agent_command, "--json"]
            single += ["--concurrency", "8", "--work-dir", str(tmp_path / "one")]
            alone = subprocess.Popen(
                single, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            started.append(alone)
            _wait(lambda: _alive_workers(store) >= 3, "three workers")
            _wait(lambda: _up(serve_url), "tracecard serve")

            # 1. [limits.model.model] concurrency = 2 holds across the 3 workers (12 slots):
            # counted where the requests land, at the scripted model
            few = _suite(tmp_path / "few.json", 8)
            # in this process (no interpreter to start): `run --queue` only enqueues and follows
            limited_run = ["run", "--queue", "--server", serve_url, "--db", pg_url]
            limited_run += ["--config", str(limited), "--suite", str(few), "--name", "limited"]
            limited_run += ["--agent", agent_command, "--timeout", "60"]
            limited_run += ["--follow-interval", "0.3", "--json"]
            assert main(limited_run) == 0
            assert json.loads(capsys.readouterr().out)["cells"]["done"] == 8
            assert model.requests == 8
            assert model.most == 2, f"{model.most} model requests at once under a limit of 2"

            # 2. 20 tasks x 3 trials, enqueued and followed by `tracecard run --queue`
            run = _tracecard("run", "--queue", "--server", serve_url, "--db", pg_url)
            run += ["--config", str(plain), "--suite", str(suite), "--name", "queued"]
            run += ["--trials", "3", "--agent", agent_command, "--timeout", "60"]
            run += ["--follow-interval", "0.3", "--json"]
            follower = subprocess.Popen(
                run, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            victim = workers[0]
            victim_id = _executor_of(store, victim.pid)
            _wait(lambda: _running_attempts(store, victim_id) > 0, "a cell on the first worker")
            victim.send_signal(signal.SIGKILL)  # kill -9, mid-cell
            out, err = follower.communicate(timeout=400)
            assert follower.returncode == 0, err
            summary = json.loads(out)
            experiment_id = summary["experiment_id"]
            cells = _cells(serve_url, experiment_id)
            assert cells["counts"]["done"] == TASKS * 3, cells["counts"]
            # every cell exactly once: one completed, scored attempt per cell
            scored = _rows(
                store,
                "SELECT r.task_id, r.trial, count(DISTINCT r.id) FROM runs r JOIN scores s "
                "ON s.run_id = r.id WHERE r.experiment_id = :e GROUP BY r.task_id, r.trial",
                e=experiment_id,
            )
            assert len(scored) == TASKS * 3 and all(row[2] == 1 for row in scored)
            lost = _rows(
                store,
                "SELECT r.id, r.status, r.end_reason, a.executor FROM runs r JOIN job_attempts a "
                "ON a.run_id = r.id WHERE r.experiment_id = :e AND a.state = 'lost'",
                e=experiment_id,
            )
            assert lost, "the killed worker's cell was not recorded as a lost attempt"
            for _run_id, status, reason, executor in lost:
                assert (status, reason, executor) == ("errored", "worker_lost", victim_id)
            lost_ids = [row[0] for row in lost]
            assert not _rows(
                store, "SELECT 1 FROM scores WHERE run_id = ANY(:ids)", ids=lost_ids
            ), "a lost attempt was scored"
            assert {a["executor"] for c in cells["cells"] for a in c["attempts"]} - {victim_id}

            # the same cells on one machine (plain `tracecard run`, SQLite) score the same
            alone_out, alone_err = alone.communicate(timeout=400)
            assert alone.returncode == 0, alone_err
            one = json.loads(alone_out)
            assert one["components"] == summary["components"]
            queued_card = httpx.get(
                f"{serve_url}/api/experiments/{experiment_id}/scorecard.json", timeout=30
            ).json()
            assert _per_task(queued_card)  # per task, not only the means

            # 3. everything killed mid-experiment; a new worker and `experiment resume` finish it
            slow = [*run[: run.index("--trials")], "--trials", "1", *run[run.index("--agent") :]]
            slow[slow.index(str(suite))] = str(few)
            slow[slow.index("queued")] = "resumed"
            follower = subprocess.Popen(
                slow, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            resumed_id = _wait_experiment(store, "resumed")
            _wait(lambda: _begun(store, resumed_id) >= 2, "cells begun on the two workers left")
            for worker in workers[1:]:
                worker.send_signal(signal.SIGKILL)
            follower.kill()
            follower.wait(30)
            _worker(started, pg_url, limited, tmp_path, "n0")
            _wait(lambda: _alive_workers(store) >= 1, "a new worker")
            resume = ["experiment", "resume", resumed_id, "--db", pg_url, "--config", str(plain)]
            # every old worker is dead (kill -9): 2 s of silence is enough to claim them
            assert main([*resume, "--lost-after", "2", "--json"]) == 0
            _wait(lambda: _cells(serve_url, resumed_id)["counts"]["done"] == 8, "the resumed cells")
            lost_runs = _rows(
                store,
                "SELECT r.status, r.end_reason, (SELECT count(*) FROM scores s WHERE s.run_id = "
                "r.id) FROM runs r JOIN job_attempts a ON a.run_id = r.id "
                "WHERE r.experiment_id = :e AND a.state = 'lost'",
                e=resumed_id,
            )
            assert lost_runs and all(row == ("errored", "worker_lost", 0) for row in lost_runs)
    finally:
        model.close()
        own_model.close()
        store.dispose()


def _wait_experiment(store: Store, name: str) -> str:
    found: list[str] = []

    def made() -> bool:
        rows = _rows(store, "SELECT id FROM experiments WHERE config_name = :n", n=name)
        found[:] = [str(row[0]) for row in rows]
        return bool(found)

    _wait(made, f"experiment {name}")
    return found[0]


def _begun(store: Store, experiment_id: str) -> int:
    rows = _rows(
        store, "SELECT count(*) FROM job_attempts WHERE experiment_id = :e", e=experiment_id
    )
    return int(rows[0][0])


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _alive_workers(store: Store) -> int:
    try:
        rows = _rows(
            store,
            "SELECT count(*) FROM job_workers WHERE stopped_at IS NULL AND recovered_by IS NULL "
            "AND heartbeat_at > now() - interval '3 seconds'",
        )
    except Exception:  # noqa: BLE001 - the schema is not there before the first start
        return 0
    return int(rows[0][0])


def _executor_of(store: Store, pid: int) -> str:
    rows = _rows(store, "SELECT id FROM job_workers WHERE pid = :pid", pid=pid)
    assert rows, f"no worker row for pid {pid}"
    return str(rows[0][0])


def _running_attempts(store: Store, executor: str) -> int:
    rows = _rows(
        store,
        "SELECT count(*) FROM job_attempts a JOIN runs r ON r.id = a.run_id "
        "WHERE a.executor = :x AND r.status NOT IN ('finished', 'errored', 'timed_out')",
        x=executor,
    )
    return int(rows[0][0])
