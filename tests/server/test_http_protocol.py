"""What one answer writes in one loop turn leaves in one socket write (#24 item 2): a whole
answer's head and body, a proxied SSE answer's head, event and end; nothing waits past the loop
turn, so a streamed answer's head still leaves before the loop waits. Driven through uvicorn's own
request cycle, on a transport that records what reaches the socket."""

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
    loop = asyncio.get_running_loop()
    cycle.transport = _OneWrite(socket, cycle, loop)  # type: ignore[assignment]
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
    await asyncio.sleep(0)  # the rest comes in a later loop turn
    await cycle.send({"type": "http.response.body", "body": b"def"})
    assert len(socket.writes) == 2 and socket.writes[0].endswith(b"\r\n\r\nabc")
    assert socket.writes[1] == b"def"


@pytest.mark.parametrize(
    ("method", "length"), [("POST", None), ("HEAD", b"11"), ("POST", b"0")], ids=str
)
async def test_a_head_with_nothing_after_it_leaves_when_the_loop_turn_ends(
    method: str, length: bytes | None
) -> None:
    """A stream, a HEAD request or an empty body: the head is not held for a body."""
    socket = Socket()
    cycle = _cycle(socket, method)
    await cycle.send(_start(length))
    if length == b"0":  # its (empty) body ends the answer: it goes at once
        await cycle.send({"type": "http.response.body", "body": b""})
        assert len(socket.writes) == 1
    await asyncio.sleep(0)  # the loop turns once: nothing is held past it
    assert len(socket.writes) == 1 and socket.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")


async def test_a_stream_written_in_one_loop_turn_is_one_write() -> None:
    """An SSE answer whose event and end came with its head: head, event and end in one."""
    socket = Socket()
    cycle = _cycle(socket)
    await cycle.send(_start(None))
    await cycle.send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    await cycle.send({"type": "http.response.body", "body": b""})
    assert len(socket.writes) == 1
    assert socket.writes[0].endswith(b"\r\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n")


async def test_a_stream_over_several_loop_turns_sends_each_turns_bytes() -> None:
    """Events that arrive later go when they arrive: nothing waits for the stream's end."""
    socket = Socket()
    cycle = _cycle(socket)
    await cycle.send(_start(None))
    await cycle.send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    await asyncio.sleep(0)
    assert len(socket.writes) == 1 and socket.writes[0].endswith(b"data: 1\n\n\r\n")
    await cycle.send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": True})
    await asyncio.sleep(0)
    assert socket.writes[1:] == [b"9\r\ndata: 2\n\n\r\n"]
    await cycle.send({"type": "http.response.body", "body": b""})
    assert socket.writes[2:] == [b"0\r\n\r\n"]  # the end goes at once


async def test_a_close_before_the_body_still_sends_the_head() -> None:
    socket = Socket()
    cycle = _cycle(socket)
    await cycle.send(_start(b"11"))
    cycle.transport.close()
    assert socket.closed and len(socket.writes) == 1
    assert socket.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
