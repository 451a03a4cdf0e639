"""Run a real tracecard server (uvicorn, uvloop, httptools) in a thread for integration tests."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from tracecard.server.app import asgi_app
from tracecard.server.runtime import Runtime
from tracecard.server.serving import TracecardServer, server_options
from tracecard.server.settings import Settings


@dataclass
class RunningServer:
    url: str
    settings: Settings
    server: uvicorn.Server


def bound_socket() -> socket.socket:
    """A TCP socket bound to a free 127.0.0.1 port, not yet listening (connections are refused
    until a server starts on it). The port is held from here on: unlike `free_port()`, which
    binds, closes and hands the number over, nothing else can take it in between.

    The protocol is named: asyncio sets TCP_NODELAY on accepted connections only when the
    listening socket says IPPROTO_TCP, and without it every answer written in two parts (head,
    body) waited ~40 ms for the client's delayed ACK."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(
    config: uvicorn.Config, sock: socket.socket, what: str = "tracecard"
) -> Iterator[uvicorn.Server]:
    """Serve `config` (a real uvicorn) on the pre-bound `sock` in a thread until the block ends;
    the one running-server helper every in-process test server goes through."""
    config.host, config.port = "127.0.0.1", port_of(sock)
    server = TracecardServer(config)  # drains like `tracecard serve`
    # run(), not asyncio.run(serve()): only run() takes config.loop (uvloop, as `tracecard serve`)
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.02)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@contextlib.contextmanager
def running_tracecard(
    settings: Settings, sock: socket.socket | None = None
) -> Iterator[RunningServer]:
    """Serve `settings` on `sock` (default: a fresh pre-bound socket) until the block ends;
    shutdown flushes every span."""
    sock = sock or bound_socket()
    port = port_of(sock)
    settings = settings.model_copy(update={"port": port, "host": "127.0.0.1"})
    config = uvicorn.Config(
        asgi_app(settings),
        loop="uvloop",
        log_level="warning",
        **server_options(settings),
    )
    with serving(config, sock) as server:
        yield RunningServer(url=f"http://127.0.0.1:{port}", settings=settings, server=server)


def runtime_of(running: RunningServer) -> Runtime:
    """The live runtime of a running tracecard (tests set hooks such as `enforce` on it)."""
    return runtime_in(running.server.config.app)


def runtime_in(app: Any) -> Runtime:
    """The runtime of the app as served (`asgi_app`), once its lifespan has started."""
    while not hasattr(app, "state"):  # token guard -> proxy router -> Litestar
        app = app.app
    runtime: Runtime = app.state.runtime
    return runtime


def await_flush(running: RunningServer) -> None:
    """Wait until every span recorded so far is in the database (runs on the server's loop)."""
    import httpx

    # reading a run's spans flushes the recorder first; a throwaway run is enough
    run_id = httpx.post(f"{running.url}/api/runs", json={}, timeout=30).json()["id"]
    httpx.get(f"{running.url}/api/runs/{run_id}/spans", timeout=30).raise_for_status()
