"""The proxy's upstream client (aiohttp, called directly) and the bounded session map."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from yarl import URL

from tests.support.processes import free_port
from tracecard.server.proxy.sessions import SessionRuns
from tracecard.server.proxy.transport import make_proxy_client
from tracecard.server.runs.registry import RunInfo

BODY = gzip.compress(b'{"jsonrpc":"2.0","id":1,"result":{}}')


@asynccontextmanager
async def upstream(seen: list[bytes]) -> AsyncIterator[str]:
    """A raw HTTP/1.1 server that logs each request head and answers gzip with a cookie."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head)
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Set-Cookie: agent=one\r\nConnection: close\r\nContent-Length: "
            + str(len(BODY)).encode()
            + b"\r\n\r\n"
            + BODY
        )
        await writer.drain()
        writer.close()

    port = free_port()
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        yield f"http://127.0.0.1:{port}/mcp"


async def test_sends_only_the_given_headers_and_never_decompresses() -> None:
    seen: list[bytes] = []
    client = make_proxy_client()
    async with upstream(seen) as url:
        for _ in range(2):  # the second request would carry the first answer's cookie, if kept
            response = await client.open("POST", URL(url), [("x-agent", "a")], b"{}")
            body = b"".join([chunk async for chunk in response.aiter_raw()])
            await response.aclose()
    await client.aclose()
    assert body == BODY  # still gzip: the agent gets the bytes the upstream sent
    assert response.headers["content-encoding"] == "gzip"
    assert (b"Content-Encoding", b"gzip") in response.raw_headers  # the head as it came
    for head in seen:
        lines = head.decode().lower().split("\r\n")
        names = sorted(line.split(":")[0] for line in lines[1:] if line)
        assert names == ["content-length", "host", "x-agent"]  # no user-agent, accept, cookies


async def test_unreachable_upstream_is_an_aiohttp_client_error() -> None:
    client = make_proxy_client()
    with pytest.raises(aiohttp.ClientError) as raised:
        await client.open("POST", URL(f"http://127.0.0.1:{free_port()}/mcp"), [], b"{}")
    assert not isinstance(raised.value, TimeoutError)  # unavailable, not the call's deadline
    await client.aclose()


def _run(name: str) -> RunInfo:
    return RunInfo(id=name, trace_id="0" * 31 + "1", root_span_id="0" * 15 + "1")


def test_session_runs_are_bounded_by_count_and_idle_time() -> None:
    now = [0.0]
    forgotten: list[tuple[str, str]] = []
    runs = SessionRuns(
        capacity=2,
        idle_s=10,
        on_forget=lambda key, _run: forgotten.append(key),
        clock=lambda: now[0],
    )
    runs.bind(("up", "a"), _run("ra"))
    runs.bind(("up", "b"), _run("rb"))
    assert runs.bind(("up", "a"), _run("other")).id == "ra"  # the first binding stays; a is used
    runs.bind(("up", "c"), _run("rc"))  # over capacity: b, the least recently used, goes
    assert forgotten == [("up", "b")] and len(runs) == 2
    now[0] = 11.0
    assert runs.get(("up", "a")) is None  # idle too long
    runs.bind(("up", "d"), _run("rd"))  # expires c on the way
    assert ("up", "c") not in runs and len(runs) == 1
    assert runs.pop(("up", "d")) is not None and forgotten[-1] == ("up", "d")
