"""A scripted HTTP/1.1 upstream on raw asyncio streams, for what a real MCP server won't do.

It writes exact bytes (CRLF SSE, empty priming events), dies in the middle of a stream, answers
JSON-RPC batches, answers slowly, gets its Content-Length wrong, answers hugely, and serves a
plain HTTP echo. Every request it receives is
logged in `received`, so a test can check what reached the upstream (and what did not).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.processes import free_port

SSE_PRIMING = b"id: evt-0\r\ndata: \r\n\r\n"


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeUpstream:
    port: int
    received: list[Received] = field(default_factory=list)
    sent: dict[str, bytes] = field(default_factory=dict)  # last body bytes sent, per path
    resumable: list[Any] = field(default_factory=list)  # /resume requests awaiting their GET

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path: str) -> list[Any]:
        return [json.loads(r.body) for r in self.received if r.path == path and r.body]


def _results(message: Any) -> list[dict[str, Any]]:
    items = message if isinstance(message, list) else [message]
    return [
        {"jsonrpc": "2.0", "id": m["id"], "result": {"echo": m.get("params")}}
        for m in items
        if isinstance(m, dict) and "id" in m
    ]


async def _handle(
    fake: FakeUpstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            path = target.split("?", 1)[0]
            fake.received.append(Received(method, target, headers, body))
            if not await _respond(fake, path, target, method, headers, body, writer):
                return
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{n}: {v}" for n, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _respond(
    fake: FakeUpstream,
    path: str,
    target: str,
    method: str,
    headers: dict[str, str],
    body: bytes,
    writer: asyncio.StreamWriter,
) -> bool:
    """Answer one request; False when the connection must end now."""
    try:  # a body that is not JSON is answered like a notification: 202, no body
        message = json.loads(body) if body else None
    except ValueError:
        message = None
    if path.startswith("/slow"):
        await asyncio.sleep(float(target.rsplit("=", 1)[-1]) if "=" in target else 3.0)
    if path == "/stall":  # the head and half the body at once, then nothing for 3 s
        payload = json.dumps(_results(message)[0]).encode()
        head = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        writer.write(_head(200, head) + payload[: len(payload) // 2])
        await writer.drain()
        await asyncio.sleep(3.0)
        writer.write(payload[len(payload) // 2 :])
        await writer.drain()
        return True
    if path in ("/short", "/long"):  # a Content-Length the body does not keep to
        payload = json.dumps(_results(message)[0]).encode()
        declared = len(payload) + 40 if path == "/short" else len(payload) - 10
        writer.write(
            _head(200, [("content-type", "application/json"), ("content-length", str(declared))])
        )
        writer.write(payload)
        await writer.drain()
        writer.transport.abort()  # /short: fewer bytes than declared; /long: more
        return False
    if path == "/huge":  # a JSON-RPC answer of `params.size` bytes, Content-Length declared
        text = "x" * int(message["params"]["size"])
        answer = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"content": [{"type": "text", "text": text}]},
        }
        payload = json.dumps(answer).encode()
        writer.write(
            _head(
                200, [("content-type", "application/json"), ("content-length", str(len(payload)))]
            )
        )
        writer.write(payload)
        await writer.drain()
        return True
    if path in ("/mcp", "/slow"):
        results = _results(message)
        if not results:
            writer.write(_head(202, [("content-length", "0")]))
        else:
            payload = json.dumps(results if isinstance(message, list) else results[0]).encode()
            head = [("content-type", "application/json"), ("content-length", str(len(payload)))]
            head += [("server", "fake-upstream"), ("date", "Tue, 01 Dec 2026 00:00:00 GMT")]
            writer.write(_head(200, head))
            writer.write(payload)
        await writer.drain()
        return True
    if path == "/resume":  # SEP-1699: close the POST stream after priming, answer on the GET
        if method == "POST":
            fake.resumable.append(message)
            events = [b"id: r-1\r\nretry: 50\r\ndata: \r\n\r\n"]
        else:
            asked = fake.resumable.pop(0)
            answer = {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {"resumed": headers.get("last-event-id")},
            }
            events = [
                b"id: r-2\r\nevent: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n"
            ]
        writer.write(
            _head(200, [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")])
        )
        writer.write(b"".join(_chunk(event) for event in events) + b"0\r\n\r\n")
        await writer.drain()
        return True
    if path in ("/sse", "/sse-kill"):
        request_id = message.get("id") if isinstance(message, dict) else None
        progress = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 7, "progress": 1},
        }
        events = [
            SSE_PRIMING,
            b"event: message\r\ndata: " + json.dumps(progress).encode() + b"\r\n\r\n",
            b": a comment line\r\n\r\n",
        ]
        if path == "/sse":
            answer = {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {"content": [{"type": "text", "text": "ok"}]},
            }
            events.append(b"event: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n")
        fake.sent[path] = b"".join(events)
        writer.write(
            _head(200, [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")])
        )
        for event in events:
            writer.write(_chunk(event))
            await writer.drain()
            await asyncio.sleep(0.02)
        if path == "/sse-kill":
            writer.transport.abort()  # the upstream dies mid-stream: no terminating chunk
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True
    if path.startswith("/api/"):
        echo = {
            "method": method,
            "path": path,
            "query": target.split("?", 1)[1] if "?" in target else "",
            "body": body.decode("utf-8", "replace"),
            "headers": headers,
            "token": "s3cret-response-token",
        }
        payload = json.dumps(echo).encode()
        status = 500 if path.endswith("/broken") else 200
        writer.write(
            _head(
                status,
                [
                    ("content-type", "application/json"),
                    ("content-length", str(len(payload))),
                    ("set-cookie", "session=abc"),
                ],
            )
        )
        writer.write(payload)
        await writer.drain()
        return True
    writer.write(_head(404, [("content-length", "0")]))
    await writer.drain()
    return True


@contextlib.contextmanager
def fake_upstream() -> Iterator[FakeUpstream]:
    """Serve the fake upstream on a free port in a background thread."""
    fake = FakeUpstream(port=free_port())
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stopping = asyncio.Event()

    async def serve() -> None:
        server = await asyncio.start_server(
            lambda r, w: _handle(fake, r, w), "127.0.0.1", fake.port
        )
        started.set()
        async with server:
            await stopping.wait()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in handlers:  # keep-alive connections and slow answers still open
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    def run() -> None:
        loop.run_until_complete(serve())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield fake
    finally:
        loop.call_soon_threadsafe(stopping.set)
        thread.join(5)
