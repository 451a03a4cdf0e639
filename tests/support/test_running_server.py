"""The test servers themselves: what makes them fast and faithful."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
import uvloop

from tests.support.in_process import in_process_tracecard
from tests.support.tracecard import bound_socket, port_of, serving
from tracecard.server.settings import Settings


async def test_connections_to_the_pre_bound_socket_are_not_delayed_by_nagle() -> None:
    sock = bound_socket()
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = writer.get_extra_info("socket")
        accepted.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=sock)
    async with server:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port_of(sock))
        await _reader.read()
        writer.close()
    assert accepted and accepted[0] != 0


def test_the_test_servers_run_on_uvloop_as_tracecard_serve_does() -> None:
    loops: list[type] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        loops.append(type(asyncio.get_running_loop()))
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})

    config = uvicorn.Config(app, loop="uvloop", lifespan="on", log_level="warning")
    with serving(config, bound_socket(), "a bare app"):
        pass
    assert loops == [uvloop.Loop]


def test_in_process_requests_pass_the_guard_and_redirects_are_answers(settings: Settings) -> None:
    token = settings.model_copy(update={"api_token": "t"})
    with in_process_tracecard(token) as tracecard:
        assert tracecard.url == f"http://127.0.0.1:{settings.port}"
        page = tracecard.client.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 303  # not followed: the test sees what a client gets
        assert tracecard.client.post("/api/runs", json={}).status_code == 401
        assert tracecard.runtime.settings.api_token == "t"
