"""Tool-definition drift: the same suite against two versions of one MCP server whose `echo`
schema differs; the comparison names the drifted tool and the runs, and refuses a verdict
unless --allow-drift (API `allow_drift=true`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.in_process import in_process_tracecard
from tests.support.processes import mcp_tool_server
from tests.support.proxy import tracecard_for
from tracecard.server.cli.main import main
from tracecard.server.settings import Settings

TASK = """
[[tasks]]
id = "{task}"
instruction = "echo hi"
upstreams = ["tools"]

[[tasks.invocation.calls]]
tool = "echo"
arguments = {{ text = "hi" }}
"""
SUITE = 'schema_version = 1\nname = "drift"\n' + TASK.format(task="a") + TASK.format(task="b")


async def _agent(url: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            await client.list_tools()
            await client.call_tool("echo", {"text": "hi"})


def _experiment(db: str, folder: Path, version_flags: tuple[str, ...]) -> str:
    with (
        mcp_tool_server(*version_flags) as url,
        tracecard_for({"tools": {"url": url}}, folder, db=db) as server,
    ):
        with httpx.Client(base_url=server.url, timeout=60) as http:
            suite = SUITE
            toml = {"content-type": "application/toml"}
            assert http.post("/api/suites", content=suite, headers=toml).status_code == 201
            created = http.post(
                "/api/experiments", json={"suite": "drift", "config": {"name": "c"}, "trials": 2}
            )
            assert created.status_code == 201, created.text
            for run in created.json()["runs"]:
                asyncio.run(_agent(run["urls"]["tools"]))
                http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "hi"})
            return str(created.json()["id"])


@pytest.fixture(scope="module")
def experiments(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str, Path]:
    folder = tmp_path_factory.mktemp("drift")
    db = f"sqlite:///{folder / 'tracecard.db'}"
    old = _experiment(db, folder, ())
    new = _experiment(db, folder, ("--v2",))
    return db, old, new, folder


def test_the_comparison_names_the_drifted_tool_and_refuses_a_verdict(
    experiments: tuple[str, str, str, Path],
) -> None:
    db, old, new, folder = experiments
    # the comparison reads only what was recorded: in process, and no upstream configured
    settings = Settings(db=db, sandbox_root=str(folder / "sandboxes"))
    with in_process_tracecard(settings) as server:
        http = server.client
        view: dict[str, Any] = http.get("/api/compare", params={"a": old, "b": new}).json()
        allowed = http.get(
            "/api/compare", params={"a": old, "b": new, "allow_drift": "true"}
        ).json()
        same = http.get("/api/compare", params={"a": old, "b": old}).json()
    drift = view["tool_drift"]
    assert drift["drifted"] and [(t["upstream"], t["tool"]) for t in drift["tools"]] == [
        ("tools", "echo")
    ]
    versions = drift["tools"][0]["versions"]
    assert len(versions) == 2 and sorted(len(r) for r in versions.values()) == [4, 4]  # 2 tasks x 2
    assert view["verdict"] is None and "tools/echo" in view["reason"]
    assert "--allow-drift" in view["reason"]
    assert (
        allowed["verdict"] == allowed["verdict_without_drift"]
        if "verdict_without_drift" in allowed
        else allowed["verdict"] is not None
    )
    assert same["tool_drift"]["drifted"] is False and same["verdict"] is not None


def test_tracecard_compare_refuses_without_allow_drift(
    experiments: tuple[str, str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, old, new, _folder = experiments
    assert main(["compare", old, new, "--db", db]) == 1
    assert "tool definitions differ" in capsys.readouterr().err
    assert main(["compare", old, new, "--db", db, "--allow-drift", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["tool_drift"]["drifted"] is True and document["verdict"] is not None
