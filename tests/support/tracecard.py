"""Run a real tracecard server (uvicorn, uvloop, httptools) in a thread for integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from tests.support.processes import free_port
from tracecard.server.app import asgi_app
from tracecard.server.runtime import Runtime
from tracecard.server.serving import TracecardServer, server_options
from tracecard.server.settings import Settings


@dataclass
class RunningServer:
    url: str
    settings: Settings
    server: uvicorn.Server


@contextlib.contextmanager
def serving(config: uvicorn.Config, what: str = "tracecard") -> Iterator[uvicorn.Server]:
    """Serve `config` (a real uvicorn) in a thread until the block ends."""
    server = TracecardServer(config)  # drains like `tracecard serve`
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
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


@contextlib.contextmanager
def running_tracecard(settings: Settings) -> Iterator[RunningServer]:
    """Serve `settings` on a free port until the block ends; shutdown flushes every span."""
    port = free_port()
    settings = settings.model_copy(update={"port": port, "host": "127.0.0.1"})
    config = uvicorn.Config(
        asgi_app(settings),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        log_level="warning",
        **server_options(settings),
    )
    with serving(config) as server:
        yield RunningServer(url=f"http://127.0.0.1:{port}", settings=settings, server=server)


def runtime_of(running: RunningServer) -> Runtime:
    """The live runtime of a running tracecard (tests set hooks such as `enforce` on it)."""
    app = running.server.config.app
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
