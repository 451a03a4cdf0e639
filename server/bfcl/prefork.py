"""The pre-forked parent of the per-run BFCL servers: imports once, forks a fresh server per run.

    python -m tracecard.server.bfcl.prefork SOCKET [CATEGORY ...]

tracecard starts it as the BFCL upstream's `preload` (docs/stdio.md, "Warm processes"). It
imports the MCP SDK, `bfcl_eval`, every environment class's module, and reads the named
categories' entries (all supported ones by default), then prints `ready` and listens on SOCKET.
A run's relay (server/bfcl/relay.py) connects and hands over its stdin, stdout, stderr, its
arguments, working directory and environment; the parent forks, and the child becomes
`python -m tracecard.server.bfcl.mcp_server ENTRY_ID` on those descriptors. The relay is told
the child's exit status when it ends; the child exits when the relay is gone.

Why a forked child is a fresh server (docs/benchmarks/bfcl.md, "Pre-forked servers"): the parent
only imports and reads data files; it never builds an `Environment`, executes a method or runs
an event loop, so its memory is what any process holds after the same imports, and the child
gets a copy of it that no other run's server shares or touches. The child takes the relay's
working directory and environment, reseeds `random` from the OS as a new interpreter does, and
then does exactly what a cold server does after its imports.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import signal
import socket
import sys
import threading
import traceback
from typing import Any

REQUEST_TIMEOUT_S = 10.0
_children: dict[int, socket.socket] = {}  # pid -> its relay's connection (for its exit status)


def preload(categories: list[str]) -> None:
    """Everything a server needs before its entry: the SDK, bfcl_eval, classes, data."""
    import anyio._backends._asyncio  # noqa: F401 - anyio.run loads it on first use
    import mcp.server.stdio  # noqa: F401

    from tracecard.server.bfcl import env, mcp_server  # noqa: F401

    config = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    for name, module in config.CLASS_FILE_PATH_MAPPING.items():
        try:  # the memory and web-search classes need extras tracecard does not support
            importlib.import_module(module)
            env.function_docs(name)
        except (ImportError, KeyError, OSError):
            continue
    for category in categories or [*env.MULTI_TURN, *env.SINGLE_TURN]:
        env.entries(category)


def _reap(_signum: int, _frame: Any) -> None:
    """Collect exited children and tell each one's relay how it ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = _children.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
            except OSError:
                pass  # the relay is gone already
            conn.close()


def _serve_child(conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
    """In the forked child: become the entry's server on the relay's descriptors; never returns."""
    code = 1
    try:
        for other in _children.values():
            other.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()  # a new interpreter seeds from the OS; a fork would repeat the parent's

        def watch_relay() -> None:
            while conn.recv(64):
                pass
            os._exit(0)  # the relay was stopped: nobody reads this server any more

        threading.Thread(target=watch_relay, daemon=True).start()
        from tracecard.server.bfcl import mcp_server

        sys.argv = [mcp_server.__file__, *request["argv"]]
        code = mcp_server.main(list(request["argv"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _accept(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    conn.settimeout(REQUEST_TIMEOUT_S)
    fds: list[int] = []
    try:
        _, fds, _, _ = socket.recv_fds(conn, 16, 3)
        line = conn.makefile("rb").readline()
        request = json.loads(line)
        if len(fds) != 3 or not isinstance(request.get("argv"), list):
            raise ValueError("not a relay's request")
    except (OSError, ValueError) as exc:
        print(f"prefork: dropped a connection: {exc}", file=sys.stderr, flush=True)
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    conn.settimeout(None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # no reaping before it is known
    pid = -1
    try:
        pid = os.fork()
        if pid == 0:
            listener.close()
            _serve_child(conn, fds, request)
        _children[pid] = conn
    finally:
        if pid != 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    for fd in fds:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    preload(args[1:])
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, _reap)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(args[0])
        listener.listen(64)
        listener.settimeout(1.0)
        print("ready", flush=True)
        while True:
            try:
                _accept(listener)
            except TimeoutError:
                if os.getppid() != parent:  # tracecard is gone: so are we
                    return 0


if __name__ == "__main__":
    raise SystemExit(main())
