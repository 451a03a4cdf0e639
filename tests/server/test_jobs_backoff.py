"""A 429 from a model upstream backs its limits key off for every worker (#21.3), measured where
the requests land: two real `tracecard worker` processes on PostgreSQL run 4 cells whose agents
ask a scripted model at staggered times and retry a 429 after 0.3 s; the model answers the
first request 429 with `Retry-After: 3`, every other one 200. No request may reach it between
that 429 and 3 s later, from either worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import stop
from tests.support.scripted_model import ScriptedModel
from tracecard.server.jobs.backoff import retry_after_s
from tracecard.traces.store import Store

RETRY_AFTER_S = 3.0
SLACK_S = 0.15  # a request that passed its proxy's check as the 429 was being written

# Asks the model at 0.5 s x its task number, retries a 429 after 0.3 s: an impatient agent.
AGENT = """
import json, os, time, urllib.error, urllib.request
task = os.environ["TRACECARD_TASK_ID"]
time.sleep(0.5 * int(task[1:]))
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": task}]}).encode()
for attempt in range(10):
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                                     {"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=60).read()
        break
    except urllib.error.HTTPError as exc:
        if exc.code != 429:
            raise
        time.sleep(0.3)
print("the answer is 42")
"""


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    now = datetime(2026, 12, 3, 17, 0, 0, tzinfo=UTC)
    assert retry_after_s("3", now) == 3.0
    assert retry_after_s("Thu, 03 Dec 2026 17:00:05 GMT", now) == 5.0
    assert retry_after_s("soon", now) is None and retry_after_s(None, now) is None


def _wait(condition: Any, what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _count(store: Store, sql: str) -> int:
    from sqlalchemy import text

    try:
        with store.engine.connect() as connection:
            return int(connection.execute(text(sql)).scalar() or 0)
    except Exception:  # noqa: BLE001 - the tables are not there before the first start
        return 0


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_429_holds_the_key_on_every_worker(pg_url: str, tmp_path: Path) -> None:
    model = ScriptedModel(retry_after_s=RETRY_AFTER_S)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    config = tmp_path / "tracecard.toml"
    config.write_text(
        f'[upstreams.model]\nurl = "{model.url}"\nkind = "openai"\n'
        "[limits.model.model]\nconcurrency = 8\n"
    )
    suite = tmp_path / "suite.json"
    tasks = [{"id": f"t{i}", "instruction": "say 42"} for i in range(4)]
    suite.write_text(json.dumps({"schema_version": 2, "name": "limited", "tasks": tasks}))
    env = {**os.environ, "TRACECARD_JOBS_POLL_S": "0.05"}
    cli = [sys.executable, "-m", "tracecard.server.cli"]
    store = Store(pg_url)
    started: list[subprocess.Popen[Any]] = []
    try:
        for name in ("a", "b"):  # two cells at a time each: the 4 cells land on both
            argv = [*cli, "worker", "--db", pg_url, "--config", str(config), "--concurrency", "2"]
            argv += ["--heartbeat", "0.5", "--work-dir", str(tmp_path / name)]
            log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
            started.append(
                subprocess.Popen(
                    argv, cwd=tmp_path, env=env, stdout=log, stderr=log, start_new_session=True
                )
            )
        _wait(lambda: _count(store, "SELECT count(*) FROM job_workers") == 2, "two workers")
        run = [*cli, "run", "--queue", "--db", pg_url, "--config", str(config), "--port", "0"]
        run += ["--suite", str(suite), "--name", "limited", "--json", "--follow-interval", "0.3"]
        run += ["--agent", f"{sys.executable} {agent}", "--timeout", "120"]
        done = subprocess.run(
            run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["cells"]["done"] == 4

        executors = _count(store, "SELECT count(DISTINCT executor) FROM job_attempts")
        assert executors == 2, "the cells did not run on both workers"
        assert model.limited_at is not None
        after = sorted(t - model.limited_at for t in model.arrivals if t > model.limited_at)
        # the 429'd agent's retry (0.3 s later) and the later cells' requests all waited
        early = [round(t, 2) for t in after if SLACK_S < t < RETRY_AFTER_S - SLACK_S]
        assert not early, f"requests {early} s after the 429, inside its {RETRY_AFTER_S:g} s"
        assert len(after) >= 2, f"only {len(after)} request(s) after the 429: nothing was held"
    finally:
        for process in started:
            stop(process, 30)
        model.close()
        store.dispose()
