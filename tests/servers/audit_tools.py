"""A small real MCP server (the official SDK's `MCPServer`, stdio) with the defects
`tracecard audit` must find planted in it (tests/server/test_audit.py):

    python tests/servers/audit_tools.py SANDBOX

State: integer values by key in SANDBOX/state.json (every key starts at 0). `set_value` refuses
negative values; `flaky_set` writes only on every second call counted across processes in the
file AUDIT_TOOLS_COUNTER (an environment that changes between trials, deterministically).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("audit-tools", log_level="ERROR")
STATE = Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "state.json"


def _load() -> dict[str, int]:
    if not STATE.exists():
        return {}
    state: dict[str, int] = json.loads(STATE.read_text(encoding="utf-8"))
    return state


def _save(state: dict[str, int]) -> None:
    STATE.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")


@server.tool()
def get_value(key: str) -> dict[str, Any]:
    """The value stored under a key (0 when never set)."""
    return {"key": key, "value": _load().get(key, 0)}


@server.tool()
def set_value(key: str, value: int) -> dict[str, Any]:
    """Store a value under a key; negative values are refused."""
    if value < 0:
        raise ToolError(f"value must not be negative, got {value}")
    state = _load()
    state[key] = value
    _save(state)
    return {"key": key, "value": value}


@server.tool()
def flaky_set(key: str, value: int) -> dict[str, Any]:
    """Store a value under a key (this environment drops every second write)."""
    with open(os.environ["AUDIT_TOOLS_COUNTER"], "a+", encoding="utf-8") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        calls = len(counter.read()) + 1
        counter.write("x")
    if calls % 2 == 1:
        state = _load()
        state[key] = value
        _save(state)
    return {"key": key, "value": value}


if __name__ == "__main__":
    server.run("stdio")
