"""SIGTERM while calls run: each is answered on its own terms and recorded, none gets a 500.

A real `tracecard serve` process (uvicorn) in front of the scripted upstream. One call takes
11 s, longer than uvicorn's usual 10 s graceful timeout but within its own `timeout_s`; the
other outlives its `timeout_s` of 2 s. The server is stopped with SIGTERM while both run.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers.fake_upstream import fake_upstream
from tests.support.processes import ROOT, free_port, spawn
from tests.support.proxy import MCP_HEADERS, rpc

pytestmark = pytest.mark.slow


def _call(url: str, answers: dict[str, Any], name: str) -> None:
    message = rpc("tools/call", {"name": name, "arguments": {}}, id=5)
    try:
        answer = httpx.post(url, json=message, headers=MCP_HEADERS, timeout=60)
        answers[name] = (answer.status_code, answer.json())
    except (httpx.HTTPError, ValueError) as exc:  # a cut connection or a body that is not JSON
        answers[name] = (0, repr(exc))


def test_sigterm_waits_for_calls_answers_the_late_ones_and_records_all(tmp_path: Path) -> None:
    with fake_upstream() as fake:
        config = tmp_path / "tracecard.toml"
        config.write_text(
            f'[upstreams.long]\nurl = "{fake.url}/slow?seconds=11"\ntimeout_s = 15\n'
            f'[upstreams.late]\nurl = "{fake.url}/slow?seconds=11"\ntimeout_s = 2\n'
        )
        db = tmp_path / "tracecard.db"
        port = free_port()
        args = [str(ROOT / ".venv" / "bin" / "tracecard"), "serve", "--config", str(config)]
        args += ["--port", str(port), "--db", str(db)]
        with spawn(args, port) as proc:
            base = f"http://127.0.0.1:{port}"
            run = httpx.post(f"{base}/api/runs", json={}, timeout=30).json()
            answers: dict[str, Any] = {}
            threads = [
                threading.Thread(target=_call, args=(run["urls"][name], answers, name))
                for name in ("long", "late")
            ]
            for thread in threads:
                thread.start()
            while len(fake.received) < 2:  # both calls reached the upstream
                time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGTERM)
            for thread in threads:
                thread.join(60)
            assert proc.wait(60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught
    status, answer = answers["long"]
    assert status == 200 and answer["result"]["echo"]["name"] == "long", answer
    status, answer = answers["late"]
    assert status == 200 and answer["error"]["code"] == -32000, answer
    assert "did not answer within 2.0s" in answer["error"]["message"]
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT name, json_extract(attributes, '$.\"error.type\"') FROM spans "
            "WHERE run_id = ? AND name LIKE 'tools/call%'",
            (run["id"],),
        ).fetchall()
    assert sorted(rows) == [("tools/call late", "timeout"), ("tools/call long", None)]
