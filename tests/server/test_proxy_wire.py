"""The keep-alive upstream connections (server/proxy/wire.py): the same request bytes, answers
and error classes as aiohttp's client, which the proxy used before for the same requests."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from yarl import URL

from tests.support.processes import free_port
from tracecard.server.proxy.transport import make_proxy_client
from tracecard.server.proxy.wire import WireClient, WireResponse

BODY = gzip.compress(b'{"jsonrpc":"2.0","id":1,"result":{}}')
Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[bool]]


async def _head_and_body(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


@asynccontextmanager
async def upstream(answer: Answer, seen: list[bytes], connections: list[int]) -> AsyncIterator[URL]:
    """A raw HTTP/1.1 server: `answer` writes each answer and says whether to keep the
    connection; every request (head and body) goes to `seen`, every connection to
    `connections`."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                request = await _head_and_body(reader)
                seen.append(request)
                if not await answer(reader, writer, request):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    port = free_port()
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        yield URL(f"http://127.0.0.1:{port}/mcp?x=1")


def _json(body: bytes, keep: bool = True, extra: bytes = b"") -> bytes:
    close = b"" if keep else b"Connection: close\r\n"
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        + close
        + extra
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


async def _whole(response: object) -> bytes:
    assert hasattr(response, "aiter_raw")
    return b"".join([chunk async for chunk in response.aiter_raw()])


async def test_the_same_request_bytes_and_answer_as_aiohttp() -> None:
    """Request heads of both clients carry the same headers; the answer is the same bytes."""

    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        cookies = b"Set-Cookie: agent=one\r\nset-cookie: b=\xc3\xa9\r\n"  # repeated, UTF-8
        writer.write(_json(BODY, keep=False, extra=cookies))
        await writer.drain()
        return False

    seen: list[bytes] = []
    client = make_proxy_client()
    bodies, heads = [], []
    async with upstream(answer, seen, []) as url:
        for open_ in (client.open, client.request, client.request):
            response = await open_("POST", url, [("x-agent", "a"), ("accept", "x/y")], b"{}")
            bodies.append(await _whole(response))
            found = response.headers
            looked_up = (found["content-ENCODING"], found.get("X-None"), found.get("x-none", "-"))
            heads.append((response.status_code, response.raw_headers, response.items(), looked_up))
            await response.aclose()
    await client.aclose()
    assert isinstance(response, WireResponse)
    assert bodies == [BODY] * 3  # still gzip: the agent gets the bytes the upstream sent
    assert heads[0] == heads[1] == heads[2]

    def header_lines(request: bytes) -> tuple[bytes, list[bytes]]:
        head, _, body = request.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        return lines[0], sorted([line.lower() for line in lines[1:]] + [body])

    assert header_lines(seen[0]) == header_lines(seen[1]) == header_lines(seen[2])
    assert header_lines(seen[1])[0] == b"POST /mcp?x=1 HTTP/1.1"
    names = [line.split(b":")[0] for line in header_lines(seen[1])[1] if b":" in line]
    assert names == [b"accept", b"content-length", b"host", b"x-agent"]  # no cookie sent back


async def test_a_kept_alive_connection_carries_the_next_requests() -> None:
    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(_json(BODY))
        await writer.drain()
        return True

    seen: list[bytes] = []
    connections: list[int] = []
    client = make_proxy_client()
    async with upstream(answer, seen, connections) as url:
        for _ in range(5):
            response = await client.request("POST", url, [], b"{}")
            assert await _whole(response) == BODY
            await response.aclose()
        await client.aclose()
    assert len(seen) == 5 and len(connections) == 1


async def test_an_answer_not_read_to_its_end_closes_its_connection() -> None:
    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(b"67890")
        return True

    connections: list[int] = []
    client = make_proxy_client()
    async with upstream(answer, [], connections) as url:
        for _ in range(2):
            response = await client.request("POST", url, [], b"{}")
            await response.aclose()  # the caller gave up (a deadline, a disconnect)
        await client.aclose()
    assert len(connections) == 2


async def test_an_interim_answer_is_skipped_and_a_body_may_end_with_the_connection() -> None:
    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\n\r\nall of it")
        await writer.drain()
        return False

    connections: list[int] = []
    client = make_proxy_client()
    async with upstream(answer, [], connections) as url:
        for _ in range(2):
            response = await client.request("GET", url, [], b"")
            assert response.status_code == 200 and response.raw_headers == ((b"X-A", b"1"),)
            assert await _whole(response) == b"all of it"
            await response.aclose()
        await client.aclose()
    assert len(connections) == 2  # an answer that ends with its connection is not reused


async def _failure(open_name: str, reply: bytes, close: bool) -> BaseException | bytes:
    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(reply)
        await writer.drain()
        return not close

    client = make_proxy_client()
    try:
        async with upstream(answer, [], []) as url:
            try:
                response = await getattr(client, open_name)("POST", url, [], b"{}")
                chunks = []
                try:
                    while chunk := await asyncio.wait_for(response.read_chunk(), 5):
                        chunks.append(chunk)
                finally:
                    await response.aclose()
                return b"".join(chunks)
            except Exception as exc:
                return exc
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b"", aiohttp.ServerDisconnectedError),  # closed before any head
        (b"garbage\r\n\r\n", aiohttp.ClientResponseError),  # not HTTP: a broken answer
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", aiohttp.ClientPayloadError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", None),
    ],
    ids=["closed", "not-http", "cut-body", "cut-chunks"],
)
async def test_each_failure_is_the_error_class_aiohttp_raised(
    reply: bytes, expected: type[BaseException] | None
) -> None:
    """The proxy tells a broken answer from an unavailable upstream by these classes."""
    before = await _failure("open", reply, close=True)
    now = await _failure("request", reply, close=True)
    if expected is None:  # a cut chunked body: both raise a payload error, not a clean end
        expected = aiohttp.ClientPayloadError
    assert isinstance(before, expected), before
    assert isinstance(now, expected), now
    assert isinstance(now, aiohttp.ClientResponseError) == isinstance(
        before, aiohttp.ClientResponseError
    )


async def test_an_unreachable_upstream_is_a_client_error_not_a_timeout() -> None:
    client = make_proxy_client()
    with pytest.raises(aiohttp.ClientError) as raised:
        await client.request("POST", URL(f"http://127.0.0.1:{free_port()}/mcp"), [], b"{}")
    assert not isinstance(raised.value, TimeoutError)  # unavailable, not the call's deadline
    await client.aclose()


async def test_a_header_with_a_line_break_is_refused_as_aiohttp_refuses_it() -> None:
    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(_json(BODY))
        return True

    seen: list[bytes] = []
    client = make_proxy_client()
    async with upstream(answer, seen, []) as url:
        for open_ in (client.open, client.request):
            with pytest.raises(ValueError):
                await open_("POST", url, [("x-a", "1\r\nx-b: 2")], b"{}")
        await client.aclose()
    assert seen == []  # nothing was sent


async def test_an_answer_dropped_unclosed_gives_its_connection_back() -> None:
    """A caller that fails before closing the answer must not use up the connection limit."""

    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(_json(BODY))
        return True

    client = make_proxy_client(max_connections=1)
    async with upstream(answer, [], []) as url:
        for _ in range(3):  # with the one connection held, the second request would wait
            response = await asyncio.wait_for(client.request("POST", url, [], b"{}"), 5)
            assert response.status_code == 200
            del response
        await client.aclose()


async def test_a_connection_idle_past_its_expiry_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An upstream closes idle connections at its keep-alive timeout; a POST written as that
    close crosses it would be lost. A connection idle past the expiry is closed, not reused."""
    from tracecard.server.proxy import wire

    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(_json(BODY))
        await writer.drain()
        return True

    monkeypatch.setattr(wire, "_IDLE_EXPIRY", 0.2)
    connections: list[int] = []
    client = make_proxy_client()
    async with upstream(answer, [], connections) as url:
        for pause in (0.0, 0.05, 0.4, 0.0):  # reused, reused, expired, reused
            await asyncio.sleep(pause)
            response = await client.request("POST", url, [], b"{}")
            assert await _whole(response) == BODY
            await response.aclose()
        await client.aclose()
    assert len(connections) == 2


async def test_at_most_limit_connections_are_busy_and_a_cancelled_wait_frees_nothing() -> None:
    """With a limit of one, a second request waits for the first answer to be done with; a
    waiting request cancelled gives up no slot it did not have, and the next one still runs."""

    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _q: bytes) -> bool:
        writer.write(_json(BODY))
        await writer.drain()
        return True

    seen: list[bytes] = []
    client = WireClient(1, 5.0)
    async with upstream(answer, seen, []) as url:
        first = await client.open("POST", url, [], b"{}")
        second = asyncio.ensure_future(client.open("POST", url, [], b"{}"))
        cancelled = asyncio.ensure_future(client.open("POST", url, [], b"{}"))
        await asyncio.sleep(0.1)
        assert len(seen) == 1 and not second.done()  # waiting for the only slot
        cancelled.cancel()
        await asyncio.sleep(0)
        assert await _whole(first) == BODY
        await first.aclose()  # the slot goes to `second`
        response = await asyncio.wait_for(second, 5)
        assert await _whole(response) == BODY
        await response.aclose()
        assert cancelled.cancelled() and len(seen) == 2
        third = await asyncio.wait_for(client.open("POST", url, [], b"{}"), 5)
        await _whole(third)
        await third.aclose()
        assert len(seen) == 3
        assert client._free == 1 and not client._waiting  # no slot lost, none made up
    await client.aclose()
