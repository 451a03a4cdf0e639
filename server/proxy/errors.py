"""Answers tracecard writes itself: HTTP errors as JSON, and JSON-RPC errors for the agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import orjson

from tracecard.server.proxy.sse import sse_frame

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# JSON-RPC error codes tracecard answers with (server-defined range of JSON-RPC 2.0).
CODE_UPSTREAM = -32000  # the upstream could not be reached, timed out or broke the stream
CODE_BLOCKED = -32001  # enforce mode: a safety rule blocked the call

_JSON_HEADERS = (b"content-type", b"application/json")


class ProxyError(Exception):
    """An HTTP error the proxy answers with before (or instead of) forwarding."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = b"application/json",
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """A complete response in two ASGI messages."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, error: ProxyError) -> None:
    """The error as `{"status_code", "detail", ...}`, the same shape as the JSON API's errors."""
    body = orjson.dumps({"status_code": error.status, "detail": error.detail, **error.extra})
    await send_bytes(send, error.status, body)


def jsonrpc_error(request_id: Any, code: int, message: str, **data: Any) -> dict[str, Any]:
    """A JSON-RPC error response object for `request_id` (None when it had no usable id)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def send_jsonrpc(
    send: Send, replies: list[dict[str, Any]], batch: bool, as_sse: bool, status: int = 200
) -> None:
    """JSON-RPC replies to the agent as JSON (one object or a batch array) or as SSE events."""
    if as_sse:
        body = b"".join(sse_frame(orjson.dumps(reply)) for reply in replies)
        no_cache = [(b"cache-control", b"no-cache")]
        await send_bytes(send, status, body, b"text/event-stream", no_cache)
        return
    payload: Any = replies if batch else replies[0]
    await send_bytes(send, status, orjson.dumps(payload))
