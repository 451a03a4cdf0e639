"""The raw-ASGI plumbing shared by the proxy, the stdio bridge, the security layer and ingest.

One copy of each: the ASGI type aliases, complete-response senders, the bounded body reader,
JSON-RPC error objects and the codes tracecard answers with, SSE framing for answers tracecard
writes itself, and the parsers for the run named by `Tracecard-Run` or W3C baggage.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RawHeaders = Iterable[tuple[bytes, bytes]]

# JSON-RPC error codes tracecard answers with (the server-defined range of JSON-RPC 2.0).
CODE_UPSTREAM = -32000  # the upstream could not be reached, timed out or broke the stream
CODE_BLOCKED = -32001  # enforce mode: a safety rule blocked the call
CODE_PARSE = -32700  # JSON-RPC 2.0: the body is not JSON
CODE_INVALID = -32600  # JSON-RPC 2.0: not a valid request

RUN_HEADER = "tracecard-run"
BAGGAGE_RUN_KEY = "tracecard.run"


class BodyTooLarge(Exception):
    """The request body is over the configured limit (`size` is what was declared or counted)."""

    def __init__(self, limit: int, size: int) -> None:
        super().__init__(
            f"request body of {size} bytes or more exceeds the limit of {limit} bytes "
            "(max_body_bytes in tracecard.toml, TRACECARD_MAX_BODY_BYTES)"
        )
        self.limit = limit
        self.size = size


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


async def read_body(receive: Receive, limit: int, declared: int | None = None) -> bytes:
    """The whole request body; `BodyTooLarge` past `limit`, `ClientGone` on a disconnect."""
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit, declared)
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGone("the client disconnected while sending the body")
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise BodyTooLarge(limit, len(body))
        return body
    parts = [body]
    size = len(body)
    while message.get("more_body", False):
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("the client disconnected while sending the body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit, size)
        parts.append(chunk)
    return b"".join(parts)


async def wait_disconnect(receive: Receive) -> None:
    """Return when the client goes away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def send_bytes(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: bytes | None = b"application/json",
    headers: RawHeaders = (),
) -> None:
    """A complete response in two ASGI messages (no content type when `content_type` is None)."""
    raw = [(b"content-type", content_type)] if content_type is not None else []
    raw.append((b"content-length", str(len(body)).encode()))
    raw.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def json_bytes(document: Any) -> bytes:
    """`document` as compact JSON; nested past orjson's 254 levels, through the json module.

    Raises `ValueError` (RecursionError) only past Python's own limit (~900 levels).
    """
    try:
        return orjson.dumps(document)
    except orjson.JSONEncodeError:
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


async def send_json(send: Send, status: int, document: Any, headers: RawHeaders = ()) -> None:
    """`document` as a JSON response."""
    await send_bytes(send, status, json_bytes(document), headers=headers)


def jsonrpc_error(request_id: Any, code: int, message: str, **data: Any) -> dict[str, Any]:
    """A JSON-RPC error response object for `request_id` (None when it had no usable id)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def sse_frame(data: bytes, event_id: str | None = None) -> bytes:
    """One `message` event holding `data` (only for events tracecard writes itself)."""
    head = b"id: " + event_id.encode() + b"\r\n" if event_id is not None else b""
    return head + b"event: message\r\ndata: " + data + b"\r\n\r\n"


SSE_HEADERS = ((b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"))


async def send_jsonrpc(
    send: Send, replies: list[dict[str, Any]], batch: bool, as_sse: bool, status: int = 200
) -> None:
    """JSON-RPC replies as one response: JSON (an object or a batch array) or SSE events."""
    if as_sse:
        body = b"".join(sse_frame(orjson.dumps(reply)) for reply in replies)
        await send_bytes(send, status, body, None, SSE_HEADERS)
        return
    await send_bytes(send, status, orjson.dumps(replies if batch else replies[0]))


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers, names lower-cased (the last value wins)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def baggage_run(baggage: str | None) -> str | None:
    """The run id in a W3C `baggage` header value (`tracecard.run=<id>`), if any."""
    if not baggage or BAGGAGE_RUN_KEY not in baggage:
        return None
    for member in baggage.split(","):
        key, _, value = member.partition("=")
        if key.strip() == BAGGAGE_RUN_KEY:
            return value.split(";", 1)[0].strip() or None
    return None


def header_run(headers: Mapping[str, str]) -> str | None:
    """The run named by lower-cased request headers: `Tracecard-Run`, else baggage."""
    explicit = headers.get(RUN_HEADER)
    if explicit and explicit.strip():
        return explicit.strip()
    return baggage_run(headers.get("baggage"))
