"""A whole answer's head and body leave in one socket write (#24 item 2); a streamed answer's
head still leaves at once. Driven through uvicorn's own request cycle, on a transport that
records what reaches the socket."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from tracecard.server.http_protocol import _OneWrite


class Socket:
    """A transport that records each write call as what one syscall would carry."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        self.writes.append(b"".join(chunks))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def _cycle(socket: Socket, method: str = "POST") -> RequestResponseCycle:
    scope: Any = {"type": "http", "method": method, "path": "/", "headers": []}
    cycle = RequestResponseCycle(
        scope=scope,
        transport=socket,  # type: ignore[arg-type]
        flow=FlowControl(socket),  # type: ignore[arg-type]
        logger=logging.getLogger("test"),
        access_logger=logging.getLogger("test.access"),
        access_log=False,
        default_headers=[],
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=True,
        on_response=lambda: None,
    )
    cycle.transport = _OneWrite(socket, cycle)  # type: ignore[assignment]
    return cycle


def _start(length: bytes | None) -> Any:
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", length))
    return {"type": "http.response.start", "status": 200, "headers": headers}


async def test_a_whole_answer_is_one_write() -> None:
    socket = Socket()
    cycle = _cycle(socket)
    await cycle.send(_start(b"11"))
    assert socket.writes == []  # held until its body
    await cycle.send({"type": "http.response.body", "body": b'{"ok":true}'})
    assert len(socket.writes) == 1
    assert socket.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert socket.writes[0].endswith(b'\r\n\r\n{"ok":true}')


async def test_a_body_in_parts_sends_the_head_with_the_first() -> None:
    socket = Socket()
    cycle = _cycle(socket)
    await cycle.send(_start(b"6"))
    await cycle.send({"type": "http.response.body", "body": b"abc", "more_body": True})
    await cycle.send({"type": "http.response.body", "body": b"def"})
    assert len(socket.writes) == 2 and socket.writes[0].endswith(b"\r\n\r\nabc")
    assert socket.writes[1] == b"def"


@pytest.mark.parametrize(
    ("method", "length"), [("POST", None), ("HEAD", b"11"), ("POST", b"0")], ids=str
)
async def test_a_stream_a_head_request_or_an_empty_body_sends_the_head_at_once(
    method: str, length: bytes | None
) -> None:
    socket = Socket()
    cycle = _cycle(socket, method)
    await cycle.send(_start(length))
    assert len(socket.writes) == 1 and socket.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_close_before_the_body_still_sends_the_head() -> None:
    socket = Socket()
    cycle = _cycle(socket)
    asyncio.run(cycle.send(_start(b"11")))
    cycle.transport.close()
    assert socket.closed and len(socket.writes) == 1
    assert socket.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
