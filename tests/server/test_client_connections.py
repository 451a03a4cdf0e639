"""The client and a kept-alive connection that the server closed: a cell of a 3-worker bench lost
its run to "Connection reset by peer" when its request met the server's keep-alive close."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
import uvicorn

from tracecard._requests import LIMITS
from tracecard.client import AsyncTracecardClient, TracecardClient, TracecardConnectionError
from tracecard.server.serving import server_options
from tracecard.server.settings import Settings

ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n"
    b'{"status":"ok"}'
)


class DropsFirst:
    """A raw HTTP server that reads the first request and closes its connection without an
    answer (what a kept-alive connection closed by the server looks like to the client), then
    answers every later request. `requests` counts the requests it read."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                while True:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        head += chunk
                    if not head:
                        break
                    self.requests += 1
                    if self.requests == 1:
                        break  # closed without an answer
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    body = head.split(b"\r\n\r\n", 1)[1]
                    while len(body) < length:
                        body += conn.recv(65536)
                    conn.sendall(ANSWER)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server() -> Iterator[DropsFirst]:
    s = DropsFirst()
    yield s
    s.close()


def test_connections_expire_before_the_server_closes_them() -> None:
    config = uvicorn.Config("tracecard.server.asgi:app", **server_options(Settings()))
    assert LIMITS.keepalive_expiry is not None
    assert LIMITS.keepalive_expiry < config.timeout_keep_alive
    with TracecardClient("http://127.0.0.1:1") as client:
        pool = client._http._transport._pool  # type: ignore[attr-defined]
        assert pool._keepalive_expiry == LIMITS.keepalive_expiry


def test_a_read_is_sent_again_once_when_the_connection_broke(server: DropsFirst) -> None:
    with TracecardClient(f"http://127.0.0.1:{server.port}") as client:
        assert client.health() == {"status": "ok"}
    assert server.requests == 2


def test_a_write_is_not_sent_twice(server: DropsFirst) -> None:
    with (
        TracecardClient(f"http://127.0.0.1:{server.port}") as client,
        pytest.raises(TracecardConnectionError),
    ):
        client.finish_run("r1", final_answer="42")
    assert server.requests == 1  # the server may have acted on it: the caller decides


def test_the_async_client_sends_a_read_again_too(server: DropsFirst) -> None:
    async def health() -> dict[str, object]:
        async with AsyncTracecardClient(f"http://127.0.0.1:{server.port}") as client:
            return await client.health()

    assert asyncio.run(health()) == {"status": "ok"}
    assert server.requests == 2
