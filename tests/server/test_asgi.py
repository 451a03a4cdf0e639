"""The shared raw-ASGI plumbing (`tracecard.server.asgi`): body limits, run headers, framing."""

from __future__ import annotations

from typing import Any

import pytest

from tracecard.server.asgi import (
    BodyTooLarge,
    ClientGone,
    baggage_run,
    header_run,
    read_body,
    sse_frame,
)


def _receiver(messages: list[dict[str, Any]]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


async def test_read_body_joins_chunks_and_enforces_the_limit() -> None:
    chunks = [
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    ]
    assert await read_body(_receiver(chunks), 4) == b"abcd"
    with pytest.raises(BodyTooLarge) as raised:
        await read_body(_receiver(chunks), 3)
    assert raised.value.limit == 3 and "max_body_bytes" in str(raised.value)
    with pytest.raises(BodyTooLarge):
        await read_body(_receiver([]), 3, declared=10)  # refused before reading
    gone = [chunks[0], {"type": "http.disconnect"}]
    with pytest.raises(ClientGone):
        await read_body(_receiver(gone), 10)


def test_baggage_and_header_run() -> None:
    assert baggage_run("a=1, tracecard.run=abc;prop=x") == "abc"
    assert baggage_run("a=1") is None
    assert header_run({"tracecard-run": " r1 ", "baggage": "tracecard.run=r2"}) == "r1"
    assert header_run({"baggage": "tracecard.run=r2"}) == "r2"


def test_sse_frames_carry_an_id_when_given() -> None:
    assert sse_frame(b"{}") == b"event: message\r\ndata: {}\r\n\r\n"
    assert sse_frame(b"{}", "7").startswith(b"id: 7\r\n")
