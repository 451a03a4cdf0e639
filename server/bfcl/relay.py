"""A run's BFCL server, forked by the pre-forked parent (server/bfcl/prefork.py) when one runs.

    python -m tracecard.server.bfcl.relay ENTRY_ID

With `$TRACECARD_PRELOAD` (the parent's Unix socket, set by tracecard while the upstream's
`preload` runs) this process hands its stdin, stdout and stderr to the parent, which forks the
entry's server onto them, and waits: it exits with the server's exit code (or dies of its
signal), and when it is stopped (its process group killed, as tracecard stops a run's process)
the server goes with it. Without the variable, or when the parent cannot be reached, it becomes
the server itself (`python -m tracecard.server.bfcl.mcp_server ENTRY_ID`): a cold start of the
same server. Standard library only, so that it starts in milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

PRELOAD_VARIABLE = "TRACECARD_PRELOAD"  # as server/stdio/preload.py sets it
SERVER_MODULE = "tracecard.server.bfcl.mcp_server"


def handoff(path: str, argv: list[str]) -> int | None:
    """Hand this process's stdio to the parent at `path`; the server's exit code, or None when
    the parent could not be reached (nothing was handed over)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(conn, [b"F"], [0, 1, 2])
        conn.sendall(json.dumps(request).encode() + b"\n")
    except OSError:
        conn.close()
        return None
    # only the server holds the pipes now: when it exits, tracecard reads the end of its stdout
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    reply = b""
    with conn:
        while chunk := conn.recv(64):
            reply += chunk
    try:
        code = int(reply.strip() or b"x")
    except ValueError:
        return 1  # the parent went away without a word: the server is gone with it
    if code < 0:  # the server died of a signal: so does this process, as a cold one would
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = os.environ.pop(PRELOAD_VARIABLE, "")
    if path:
        code = handoff(path, args)
        if code is not None:
            return code
    os.execv(sys.executable, [sys.executable, "-m", SERVER_MODULE, *args])
    return 1  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
