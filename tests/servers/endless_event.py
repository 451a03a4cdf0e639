"""A misbehaving MCP upstream on uvicorn: its tool answer is one SSE event that never ends.

`tools/call` gets a stream: a priming event (`id`), a progress notification, then the start of
the answer event, `data: {"jsonrpc":...,"result":{...,"text":"xxxx…` and more `x` without a
line end, until the reader goes away or `MAX_BYTES` (a bound, so a test cannot run away).
Other methods get ordinary JSON answers; a model's streamed `/chat/completions` gets one
chunk, then one that never ends. `EndlessUpstream.streamed` counts the bytes written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from tests.support.tracecard import bound_socket, port_of, serving

MAX_BYTES = 256 * 1024 * 1024
CHUNK = b"x" * 65536
SESSION = b"endless-session"


@dataclass
class EndlessUpstream:
    url: str
    streamed: list[int] = field(default_factory=list)  # bytes written, per endless stream
    reader_left: list[bool] = field(default_factory=list)  # it stopped because the reader left


async def _read(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def make_app(upstream: EndlessUpstream) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = json.loads(await _read(receive))
        head = [(b"mcp-session-id", SESSION)]
        if scope["path"].endswith("/chat/completions"):  # a model whose second chunk never ends
            chunk = {"id": "c1", "object": "chat.completion.chunk", "model": message["model"]}
            chunk["choices"] = [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]
            start = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            start += b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"'
            await _endless(upstream, receive, send, [], start)
            return
        if message.get("method") != "tools/call":
            if "id" not in message:
                await send({"type": "http.response.start", "status": 202, "headers": head})
                await send({"type": "http.response.body", "body": b""})
                return
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}
            result["serverInfo"] = {"name": "endless", "version": "1"}
            if message["method"] == "tools/list":
                result = {"tools": [{"name": "endless", "inputSchema": {"type": "object"}}]}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            json_head = [*head, (b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": json_head})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        progress = {"jsonrpc": "2.0", "method": "notifications/progress"}
        progress["params"] = {"progressToken": 1, "progress": 1}
        start = (
            b"id: e0\ndata: \n\n"
            + b"data: "
            + json.dumps(progress).encode()
            + b"\n\n"
            + b'data: {"jsonrpc":"2.0","id":'
            + json.dumps(message["id"]).encode()
            + b',"result":{"content":[{"type":"text","text":"'
        )
        await _endless(upstream, receive, send, head, start)

    return app


async def _endless(
    upstream: EndlessUpstream, receive: Any, send: Any, head: list[Any], start: bytes
) -> None:
    """`start`, then `x` without end until the reader leaves or `MAX_BYTES`."""
    sse = [*head, (b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": sse})
    written = len(start)
    gone = asyncio.ensure_future(_disconnect(receive))  # uvicorn's send never raises
    await send({"type": "http.response.body", "body": start, "more_body": True})
    while written < MAX_BYTES and not gone.done():
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        written += len(CHUNK)
        await asyncio.sleep(0)
    upstream.streamed.append(written)
    upstream.reader_left.append(gone.done())
    gone.cancel()
    await send({"type": "http.response.body", "body": b""})


@contextlib.contextmanager
def endless_upstream() -> Iterator[EndlessUpstream]:
    """Serve it on a free port (uvicorn in a thread) until the block ends."""
    sock = bound_socket()
    upstream = EndlessUpstream(url=f"http://127.0.0.1:{port_of(sock)}/mcp")
    config = uvicorn.Config(
        make_app(upstream), log_level="critical", access_log=False, lifespan="off"
    )
    with serving(config, sock, "the endless-event upstream"):
        yield upstream
