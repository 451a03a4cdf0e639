"""Real stdio MCP servers (npm filesystem and memory, PyPI git and time) through tracecard.

Each is reached at `/runs/{run}/mcp/{name}` by the official `mcp` client in both protocol
generations and by a pydantic-ai agent with a scripted model; every message is recorded with
`network.transport=pipe`. The filesystem server runs per run in a fresh copy of a fixture.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from tests.support.processes import ROOT
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.server.settings import Settings

BIN = ROOT / "node_modules" / ".bin"
VENV_BIN = ROOT / ".venv" / "bin"
MODES = ["legacy", "auto"]


def _git_repo(path: Path) -> Path:
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "first"], check=True, env=env)
    return path


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("stdio")
    fixture = tmp / "fixture"
    fixture.mkdir()
    (fixture / "hello.txt").write_text("hello from the fixture\n")
    repo = _git_repo(tmp / "repo")
    upstreams: dict[str, Any] = {
        "time": {"command": [str(VENV_BIN / "mcp-server-time"), "--local-timezone", "UTC"]},
        "git": {"command": [str(VENV_BIN / "mcp-server-git"), "--repository", str(repo)]},
        "memory": {
            "command": [str(BIN / "mcp-server-memory")],
            "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
        },
        "files": {
            "command": [str(BIN / "mcp-server-filesystem"), "{sandbox}"],
            "per_run": True,
            "fixture": str(fixture),
        },
    }
    settings = Settings(
        db=f"sqlite:///{tmp / 'tracecard.db'}",
        sandbox_root=str(tmp / "sandboxes"),
        upstreams=upstreams,
        recording={"batch_delay_ms": 50},
    )
    with running_tracecard(settings) as running:
        running.settings.config_path = None
        yield running


def new_run(server: RunningServer, name: str = "stdio-test") -> dict[str, Any]:
    response = httpx.post(f"{server.url}/api/runs", json={"config": {"name": name}})
    assert response.status_code == 201, response.text
    return dict(response.json())


def run_spans(server: RunningServer, run_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/api/runs/{run_id}/spans", timeout=30)
    assert response.status_code == 200, response.text
    return list(response.json()["spans"])


def finish(server: RunningServer, run_id: str) -> dict[str, Any]:
    response = httpx.post(f"{server.url}/api/runs/{run_id}/finish", json={}, timeout=60)
    assert response.status_code == 200, response.text
    return dict(response.json())


def run_view(server: RunningServer, run_id: str) -> dict[str, Any]:
    return dict(httpx.get(f"{server.url}/api/runs/{run_id}").json())


# (upstream, tool, arguments, text expected in the result); the filesystem path is filled in
CALLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "time": ("get_current_time", {"timezone": "UTC"}, "+00:00"),
    "git": ("git_status", {"repo_path": "{repo}"}, "working tree clean"),
    "memory": (
        "create_entities",
        {
            "entities": [
                {"name": "tracecard", "entityType": "tool", "observations": ["records calls"]}
            ]
        },
        "tracecard",
    ),
    "files": ("read_text_file", {"path": "{sandbox}/hello.txt"}, "hello from the fixture"),
}


async def _arguments(client: Client, upstream: str, server: RunningServer) -> dict[str, Any]:
    _tool, arguments, _text = CALLS[upstream]
    text = json.dumps(arguments).replace('"tracecard"', f'"tracecard-{secrets.token_hex(4)}"')
    if "{repo}" in text:
        repo = server.settings.upstreams["git"].command[-1]  # type: ignore[index]
        text = text.replace("{repo}", repo)
    if "{sandbox}" in text:
        allowed = await client.call_tool("list_allowed_directories", {})
        sandbox = allowed.content[0].text.splitlines()[-1].strip()  # type: ignore[union-attr]
        text = text.replace("{sandbox}", sandbox)
    return dict(json.loads(text))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("upstream", ["time", "git", "memory", "files"])
async def test_official_client_through_tracecard(
    tracecard: RunningServer, upstream: str, mode: str
) -> None:
    run = new_run(tracecard)
    tool, _arguments_template, expected = CALLS[upstream]
    async with Client(run["urls"][upstream], mode=mode) as client:
        tools = await client.list_tools()
        assert tool in {t.name for t in tools.tools}
        arguments = await _arguments(client, upstream, tracecard)
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result
        assert expected in result.content[0].text  # type: ignore[union-attr]
    spans = run_spans(tracecard, run["id"])
    call = next(s for s in spans if s["name"] == f"tools/call {tool}")
    attributes = call["attributes"]
    assert attributes["network.transport"] == "pipe"
    assert attributes["tracecard.upstream"] == upstream
    assert attributes["tracecard.run.id"] == run["id"]
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == arguments
    assert expected in attributes["gen_ai.tool.call.result"]
    assert call["trace_id"] == run["trace_id"]
    assert any(s["name"] == "tools/list" for s in spans)
    if mode == "legacy":
        assert any(s["name"] == "initialize" and "mcp.session.id" in s["attributes"] for s in spans)
    else:
        assert any(s["name"] == "server/discover" for s in spans)
    if upstream == "files":
        finish(tracecard, run["id"])


@pytest.mark.parametrize("upstream", ["time", "git", "memory", "files"])
async def test_pydantic_ai_agent_through_tracecard(tracecard: RunningServer, upstream: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    run = new_run(tracecard, "pydantic-ai")
    tool, arguments, expected = CALLS[upstream]
    arguments = json.loads(
        json.dumps(arguments)
        .replace('"tracecard"', f'"tracecard-{secrets.token_hex(4)}"')
        .replace(
            "{repo}",
            str(tracecard.settings.upstreams["git"].command[-1]),  # type: ignore[index]
        )
    )
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        if upstream == "files" and turn == 0:
            return ModelResponse(parts=[ToolCallPart("list_allowed_directories", {})])
        if upstream == "files" and turn == 1:
            content = messages[-1].parts[0].content  # type: ignore[attr-defined]
            text = content["content"] if isinstance(content, dict) else str(content)
            sandbox = text.splitlines()[-1].strip()
            call = {"path": f"{sandbox}/hello.txt"}
            return ModelResponse(parts=[ToolCallPart(tool, call)])
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart(tool, arguments)])
        content = messages[-1].parts[0].content  # type: ignore[attr-defined]
        seen.append(json.dumps(content) if not isinstance(content, str) else content)
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(run["urls"][upstream])])
    async with agent:
        result = await agent.run("use the tool")
    assert result.output == "done"
    assert expected in seen[0]
    calls = [s for s in run_spans(tracecard, run["id"]) if s["name"] == f"tools/call {tool}"]
    assert len(calls) == 1 and calls[0]["attributes"]["network.transport"] == "pipe"
    assert expected in calls[0]["attributes"]["gen_ai.tool.call.result"]
    if upstream == "files":
        finish(tracecard, run["id"])


async def test_per_run_trials_start_from_the_fixture(tracecard: RunningServer) -> None:
    """Three trials: what trial 1 writes is absent in trial 2; each sandbox keeps its end state."""
    runs = []
    for trial in range(1, 4):
        run = new_run(tracecard, "trials")
        async with Client(run["urls"]["files"], mode="legacy" if trial % 2 else "auto") as client:
            allowed = await client.call_tool("list_allowed_directories", {})
            sandbox = allowed.content[0].text.splitlines()[-1].strip()  # type: ignore[union-attr]
            listing = await client.call_tool("list_directory", {"path": sandbox})
            names = listing.content[0].text  # type: ignore[union-attr]
            assert "hello.txt" in names
            assert "trial-" not in names, f"trial {trial} sees another trial's file: {names}"
            written = await client.call_tool(
                "write_file", {"path": f"{sandbox}/trial-{trial}.txt", "content": f"trial {trial}"}
            )
            assert not written.is_error
        view = run_view(tracecard, run["id"])
        assert view["sandbox"] and Path(view["sandbox"]).samefile(sandbox)
        finish(tracecard, run["id"])
        runs.append((run, Path(view["sandbox"])))
    sandboxes = {path for _run, path in runs}
    assert len(sandboxes) == 3
    for trial, (_run, path) in enumerate(runs, start=1):
        files = sorted(p.name for p in path.iterdir())
        assert files == ["hello.txt", f"trial-{trial}.txt"]
        assert (path / f"trial-{trial}.txt").read_text() == f"trial {trial}"
