"""A preloaded helpdesk that forks one server per run, so that a run does not pay the MCP SDK's
import again (`tracecard demo` starts it; server.py relays to it when HELPDESK_PRELOADED is set).

    python examples/helpdesk/preload.py SOCKET      # listen on a Unix socket until stopped

Protocol: server.py connects, sends the state directory with its stdin, stdout and stderr
(SCM_RIGHTS); the preloader forks a child that serves MCP over those descriptors. The child
exits when its stdin closes or when the relay's connection drops (the relay was stopped), and
the relay exits when the child does, so stopping the relay's process group stops the server.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

MAX_MESSAGE = 4096


def relay(socket_path: str, state_dir: str) -> int:
    """Hand this process's stdio to a forked server; return when that server exits."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(socket_path)
        socket.send_fds(conn, [os.path.abspath(state_dir).encode()], [0, 1, 2])
        while conn.recv(MAX_MESSAGE):  # nothing is sent: EOF means the server exited
            pass
    return 0


def _child(conn: socket.socket, listener: socket.socket, state_dir: str, fds: list[int]) -> None:
    listener.close()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch_relay() -> None:
        while conn.recv(MAX_MESSAGE):
            pass
        os._exit(0)  # the relay is gone: nobody is listening any more

    threading.Thread(target=watch_relay, daemon=True).start()
    from helpdesk import serve

    try:
        serve(state_dir)
    finally:
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """Import the helpdesk once, then fork a server per connection until SIGTERM."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: preload.py SOCKET", file=sys.stderr)
        return 2
    import helpdesk  # noqa: F401 - the point: import the MCP SDK and the tools once

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    parent = os.getppid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(args[0])
        listener.listen(64)
        listener.settimeout(1.0)
        print("ready", flush=True)
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if os.getppid() != parent:  # whoever started us is gone: so are we
                    return 0
                continue
            conn.settimeout(None)
            message, fds, _flags, _addr = socket.recv_fds(conn, MAX_MESSAGE, 3)
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                conn.close()
                continue
            if os.fork() == 0:
                _child(conn, listener, message.decode(), fds)
            for fd in fds:
                os.close(fd)
            conn.close()


if __name__ == "__main__":
    sys.exit(main())
