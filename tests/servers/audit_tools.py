"""A small real MCP server (the official SDK's `MCPServer`, stdio) with the defects
`tracecard audit` must find planted in it (tests/server/test_audit.py):

    python tests/servers/audit_tools.py SANDBOX              # serve one sandbox over stdio
    python tests/servers/audit_tools.py --preload SOCKET     # import once, fork one per run

State: integer values by key in SANDBOX/state.json (every key starts at 0). `set_value` refuses
negative values; `flaky_set` writes only on every second call counted across processes in the
file AUDIT_TOOLS_COUNTER (an environment that changes between trials, deterministically).

With AUDIT_TOOLS_PRELOADED=SOCKET the per-run process is only a relay: it hands its stdin,
stdout and stderr to the preloaded process, which forks a server onto them (as the demo's
helpdesk does), so a run does not pay the MCP SDK's import (about a CPU-second) again.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

STATE = Path("state.json")


def _load() -> dict[str, int]:
    if not STATE.exists():
        return {}
    state: dict[str, int] = json.loads(STATE.read_text(encoding="utf-8"))
    return state


def _save(state: dict[str, int]) -> None:
    STATE.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")


def build() -> Any:
    """The server and its tools (imports the MCP SDK)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("audit-tools", log_level="ERROR")

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

    return server


def relay(socket_path: str, sandbox: str) -> None:
    """Hand this process's stdio to a forked server; return when that server exits."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(socket_path)
        socket.send_fds(conn, [os.path.abspath(sandbox).encode()], [0, 1, 2])
        while conn.recv(4096):  # nothing is sent: EOF means the server exited
            pass


def preload(socket_path: str) -> None:
    """Import the SDK once, then fork a server per relay until the parent goes away."""
    global STATE
    server = build()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    parent = os.getppid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(socket_path)
        listener.listen(64)
        listener.settimeout(1.0)
        print("ready", flush=True)
        while os.getppid() == parent:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            message, fds, _flags, _addr = socket.recv_fds(conn, 4096, 3)
            if len(fds) == 3 and os.fork() == 0:
                listener.close()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                STATE = Path(message.decode()) / "state.json"

                def watch(conn: socket.socket = conn) -> None:
                    while conn.recv(4096):
                        pass
                    os._exit(0)  # the relay is gone

                threading.Thread(target=watch, daemon=True).start()
                try:
                    server.run("stdio")
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            conn.close()


def main() -> None:
    global STATE
    if sys.argv[1] == "--preload":
        preload(sys.argv[2])
        return
    preloaded = os.environ.get("AUDIT_TOOLS_PRELOADED")
    if preloaded:
        relay(preloaded, sys.argv[1])
        return
    STATE = Path(sys.argv[1]) / "state.json"
    build().run("stdio")


if __name__ == "__main__":
    main()
