"""An embedded tracecard server: the real app under uvicorn, in a thread of this process.

`tracecard run` (without `--server`) and `tracecard demo` use it. It is the same server as
`tracecard serve` (same app factory, same settings), so agents reach the same proxy URLs; its
per-run upstream processes and its spans are closed and flushed when the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator

from tracecard.server.runs.service import RunError
from tracecard.server.settings import Settings

__all__ = ["embedded_server", "free_port", "port_in_use"]

QUIET_LOGGERS = ("alembic", "httpx", "httpx2", "httpcore", "mcp", "uvicorn.error")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _quiet_logging(level: int) -> None:
    """Back to the level the command chose (`--log-level`; WARNING by default): Litestar's
    logging config lowers the root's at start-up, and Alembic's migration lines and httpx's
    request lines would drown the progress bar unless `--log-level debug` asks for them."""
    logging.getLogger().setLevel(level)
    chatty = level if level <= logging.DEBUG else max(level, logging.WARNING)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(chatty)


@contextlib.contextmanager
def embedded_server(
    settings: Settings, startup_timeout_s: float = 30.0, use_running: bool = True
) -> Iterator[Settings]:
    """Serve `settings` in a background thread until the block ends; yields the settings as
    served (port 0 is replaced by a free port). `use_running`: the command has `--server`,
    which a taken port's error then suggests."""
    import uvicorn

    from tracecard.server.app import asgi_app
    from tracecard.server.serving import TracecardServer, server_options

    level = logging.getLogger().getEffectiveLevel()  # as set by `--log-level`
    if settings.port == 0:
        settings = settings.model_copy(update={"port": free_port(settings.host)})
    elif port_in_use(settings.host, settings.port):
        other = f"pass --server {settings.base_url} to use it" if use_running else "pass --port N"
        raise RunError(
            f"port {settings.port} on {settings.host} is taken (a tracecard already running?): "
            f"{other}, or --port 0 for a free port"
        )
    config = uvicorn.Config(
        asgi_app(settings),
        host=settings.host,
        port=settings.port,
        loop="asyncio",
        log_level="warning",
        **server_options(settings),
    )
    server = TracecardServer(config)
    failure: list[BaseException] = []
    _quiet_logging(level)

    def serve() -> None:
        try:
            asyncio.run(server.serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=serve, name="tracecard-embedded", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(5)
            why = f": {failure[0]!r}" if failure else ""
            raise RunError(f"the embedded tracecard did not start on {settings.base_url}{why}")
        time.sleep(0.02)
    _quiet_logging(level)
    try:
        yield settings
    finally:
        server.should_exit = True
        thread.join(60)
