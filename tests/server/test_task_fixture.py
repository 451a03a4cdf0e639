"""A task's `fixture` is copied into the run's sandbox (over the upstream's fixture), so what the
suite says is what the server does: the agent sees the task's files, and a file probe reads them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import ROOT
from tests.support.proxy import tracecard_for

FILESYSTEM = str(ROOT / "node_modules" / ".bin" / "mcp-server-filesystem")

SUITE = """
schema_version = 1
name = "fixtures"

[[tasks]]
id = "{task_id}"
instruction = "look around"
upstreams = ["files"]
{fixture}

[[tasks.outcome.probes]]
id = "task-file"
path = "task.txt"

[[tasks.outcome.probes]]
id = "shared-file"
path = "shared.txt"

[[tasks.outcome.predicates]]
probe = "task-file"
op = "eq"
value = "from the task"

[[tasks.outcome.predicates]]
probe = "shared-file"
op = "eq"
value = "{shared}"
"""


async def _list_sandbox(url: str) -> str:
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool("list_allowed_directories", {})
            allowed = result.content[0].text.splitlines()[-1].strip()  # type: ignore[union-attr]
            listing = await client.call_tool("list_directory", {"path": allowed})
            return str(listing.content[0].text)  # type: ignore[union-attr]


def test_the_task_fixture_lands_in_the_sandbox_over_the_upstream_fixture(tmp_path: Path) -> None:
    base, task_dir = tmp_path / "base", tmp_path / "task-fixture"
    base.mkdir()
    task_dir.mkdir()
    (base / "shared.txt").write_text("from the upstream")
    (task_dir / "shared.txt").write_text("from the task")  # the task's files win
    (task_dir / "task.txt").write_text("from the task")
    upstreams = {
        "files": {
            "command": [FILESYSTEM, "{sandbox}"],
            "per_run": True,
            "fixture": str(base),
        }
    }
    text = SUITE.format(task_id="with", fixture=f'fixture = "{task_dir}"', shared="from the task")
    plain = SUITE.format(task_id="without", fixture="", shared="from the upstream")
    plain = plain.replace('name = "fixtures"', 'name = "no-fixture"')
    toml = {"content-type": "application/toml"}
    with (
        tracecard_for(upstreams, tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        for suite, name in ((text, "fixtures"), (plain, "no-fixture")):
            assert http.post("/api/suites", content=suite, headers=toml).status_code == 201
            created = http.post(
                "/api/experiments", json={"suite": name, "config": {"name": "c"}, "trials": 1}
            )
            assert created.status_code == 201, created.text
            run = created.json()["runs"][0]
            listing = asyncio.run(_list_sandbox(run["urls"]["files"]))
            finished = http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "ok"})
            outcome = next(s for s in finished.json()["scores"] if s["component"] == "outcome")
            if name == "fixtures":
                assert "task.txt" in listing and "shared.txt" in listing
                assert outcome["value"] == 1.0, outcome["evidence"]
            else:  # no task fixture: only the upstream's files, and the task file is absent
                assert "task.txt" not in listing
                assert outcome["value"] == 0.5, outcome["evidence"]  # shared.txt only
