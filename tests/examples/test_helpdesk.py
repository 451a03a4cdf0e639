"""The demo's helpdesk MCP server: tools, annotations, state in the sandbox, the preloaded mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver.exceptions import ToolError

from tests.examples.helpers import HELPDESK, helpdesk_module

SERVER = str(HELPDESK / "server.py")


def _call(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    async def go() -> Any:
        async with Client(stdio_client(params)) as client:
            tools = await client.list_tools()
            results = [await client.call_tool(name, args) for name, args in calls]
            return tools.tools, results

    return anyio.run(go)


def test_tools_are_annotated_read_only_or_destructive(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=[SERVER, str(tmp_path)])
    tools, _ = _call(params, [])
    annotations = {t.name: t.annotations for t in tools}
    reads = {"list_tickets", "get_ticket", "search_tickets", "find_users", "list_files"}
    for name in reads | {"read_file"}:
        assert annotations[name].read_only_hint is True, name
    for name in ("delete_ticket", "delete_file", "deactivate_user"):
        assert annotations[name].destructive_hint is True and not annotations[name].read_only_hint
    for name in ("create_ticket", "update_ticket", "add_comment"):
        assert annotations[name].read_only_hint is False
        assert annotations[name].destructive_hint is False


def test_state_lives_in_the_sandbox_and_starts_from_the_fixture(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=[SERVER, str(tmp_path)])
    _, results = _call(
        params,
        [
            ("update_ticket", {"ticket_id": "T-1002", "assignee": "u-108"}),
            ("get_ticket", {"ticket_id": "T-404"}),
            ("list_tickets", {"status": "open"}),
        ],
    )
    assert results[0].structured_content["assignee"] == "u-108"
    assert results[1].is_error and "no ticket 'T-404'" in results[1].content[0].text
    page = results[2].structured_content
    assert page["total"] == 8 and len(page["tickets"]) == 5 and page["next_cursor"] == "5"
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["tickets"]["T-1002"]["assignee"] == "u-108"
    fixture = json.loads((HELPDESK / "fixture" / "state.json").read_text())
    assert fixture["tickets"]["T-1002"]["assignee"] is None  # the fixture itself is untouched


def test_parallel_writes_of_one_turn_all_land(tmp_path: Path) -> None:
    """An agent's parallel calls run in the SDK's worker threads at once: each update must be
    kept (escalate-globex raises three tickets in one turn; lost updates failed its outcome).
    Unlocked, 12 parallel updates lost some in 4 of 5 tries here; three tries must lose none."""
    tickets = [f"T-{1001 + i}" for i in range(12)]
    for attempt in range(3):
        folder = tmp_path / str(attempt)
        params = StdioServerParameters(command=sys.executable, args=[SERVER, str(folder)])

        async def go(params: StdioServerParameters = params) -> None:
            async with Client(stdio_client(params)) as client:
                async with anyio.create_task_group() as group:
                    for ticket in tickets:
                        arguments = {"ticket_id": ticket, "add_tags": ["outage"]}
                        group.start_soon(client.call_tool, "update_ticket", arguments)

        anyio.run(go)
        state = json.loads((folder / "state.json").read_text())
        assert [t for t in tickets if "outage" not in state["tickets"][t]["tags"]] == []


def test_tool_functions_check_their_input(tmp_path: Path) -> None:
    helpdesk = helpdesk_module(tmp_path)
    with pytest.raises(ToolError, match="priority must be one of"):
        helpdesk.update_ticket("T-1002", priority="critical")
    with pytest.raises(ToolError, match="no user"):
        helpdesk.create_ticket("x", requester="nobody")
    created = helpdesk.create_ticket("Swelling laptop battery", "u-112", "urgent")
    assert created["id"] == "T-1013"
    assert helpdesk.search_tickets("battery")["count"] == 1
    assert helpdesk.delete_file("prize-invoice.zip") == "deleted prize-invoice.zip"
    assert helpdesk.list_files("T-1005") == {"files": []}


@pytest.fixture
def preloaded(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "h.sock")
    process = subprocess.Popen(
        [sys.executable, str(HELPDESK / "preload.py"), path],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == b"ready"
    try:
        yield path
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def test_preloaded_mode_serves_the_same_and_stops_with_its_relay(
    tmp_path: Path, preloaded: str
) -> None:
    env = {**os.environ, "HELPDESK_PRELOADED": preloaded}
    sandbox = tmp_path / "sandbox"
    params = StdioServerParameters(command=sys.executable, args=[SERVER, str(sandbox)], env=env)
    tools, results = _call(params, [("add_comment", {"ticket_id": "T-1003", "text": "VPN ok"})])
    assert len(tools) == 12
    assert results[0].structured_content["comments"][0]["text"] == "VPN ok"
    assert json.loads((sandbox / "state.json").read_text())["tickets"]["T-1003"]["comments"]

    # a relay killed outright (SIGKILL, as a process group is stopped) takes its server along
    relay = subprocess.Popen(
        [sys.executable, SERVER, str(sandbox)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    preloader = int(subprocess.check_output(["pgrep", "-f", f"preload.py {preloaded}"]).split()[0])
    deadline = time.monotonic() + 10
    while not _children_of(preloader) and time.monotonic() < deadline:
        time.sleep(0.05)
    forked = _children_of(preloader)
    assert forked, "the preloader forked no server for the relay"
    os.killpg(relay.pid, signal.SIGKILL)
    relay.wait()
    deadline = time.monotonic() + 5
    while _children_of(preloader) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children_of(preloader) == []
