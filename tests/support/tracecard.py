"""Run a real tracecard server (uvicorn, uvloop, httptools) in a thread for integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from server.app import asgi_app
from server.settings import Settings
from tests.support.processes import free_port


@dataclass
class RunningServer:
    url: str
    settings: Settings
    server: uvicorn.Server


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
        http="httptools",
        lifespan="on",
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("tracecard did not start")
        time.sleep(0.02)
    try:
        yield RunningServer(url=f"http://127.0.0.1:{port}", settings=settings, server=server)
    finally:
        server.should_exit = True
        thread.join(30)
