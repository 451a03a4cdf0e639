"""A scripted model upstream: OpenAI Chat Completions and Responses, Anthropic Messages.

Every answer is built from the official SDKs' own types (`openai.types`, `anthropic.types`) so
the real clients accept it; the model name picks the script. Answers are deterministic (ids from
a hash of the request), so a direct and a proxied request get the same bytes.

Scripts (the request's `model`):
- `script-text`: a text answer;  `script-tools`: two parallel tool calls (add, echo);
- `script-refusal`: a refusal;   `script-agent`: a tool call, then (given its result) an answer;
- `script-429`, `script-500`: the provider's error body with that status;
- `script-cut`: (stream) the connection dies in the middle of a tool call's arguments;
- `script-stream-500`: (Chat Completions stream) half an answer, then llama-server's error event
  (`{"error": {"code": 500, "type": "server_error", ...}}`) and the stream's end;
  `script-stream-500-hold`: the same, but the stream stays open until the client hangs up;
  `script-stream-hold`: half an answer, no error, open until the client hangs up;
- `script-notjson`: a 200 whose body is HTML.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn

from tests.servers.model_answers import (
    TOOL_CALLS,
    TOOLS,
    anthropic_events,
    anthropic_message,
    chat_body,
    chat_events,
    dump,
    response,
    responses_events,
)
from tests.support.tracecard import bound_socket, port_of, serving

__all__ = ["TOOL_CALLS", "TOOLS", "ModelUpstream", "make_app", "model_upstream"]

Send = Any


@dataclass
class ModelUpstream:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)  # path, headers, body


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _stream(send: Send, events: list[bytes], cut: bool = False) -> None:
    head = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    for event in events:
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.sleep(0)
    if not cut:
        await send({"type": "http.response.body", "body": b""})
    # cut: return with the body unended, so uvicorn drops the connection mid-stream


# llama-server's answer to a tool call it cannot parse, mid-stream (its own shape, not OpenAI's)
STREAM_ERROR = {
    "code": 500,
    "message": "Failed to parse input: does not match the expected peg-native format",
    "type": "server_error",
}


async def _stream_error(
    send: Send, receive: Any, raw: bytes, body: dict[str, Any], hold: bool, error: bool
) -> None:
    """Half a streamed answer, then an error event; `hold`: no end until the client is gone."""
    events, _ = chat_events(raw, {**body, "model": "script-text"})
    head = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    failure = [b"data: " + orjson.dumps({"error": STREAM_ERROR}) + b"\n\n"] if error else []
    for event in [*events[:2], *failure]:
        await send({"type": "http.response.body", "body": event, "more_body": True})
    if hold:
        while (await receive())["type"] != "http.disconnect":
            pass
        return
    await send({"type": "http.response.body", "body": b""})


# --- the app ------------------------------------------------------------------------------------

_ERRORS = {
    "script-429": (429, "rate_limit_error", "Rate limit reached for requests"),
    "script-500": (500, "server_error", "The server had an error processing your request"),
}


def make_app(upstream: ModelUpstream) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        upstream.received.append({"path": path, "headers": headers, "body": raw})
        body = orjson.loads(raw)
        model = body.get("model")
        anthropic = path.endswith("/v1/messages")
        if model in _ERRORS:
            status, kind, text = _ERRORS[model]
            error = {"type": kind, "message": text}
            payload = {"type": "error", "error": error} if anthropic else {"error": error}
            await _respond(send, status, orjson.dumps(payload), b"application/json")
            return
        if model == "script-notjson":
            await _respond(send, 200, b"<html><body>gateway says hi</body></html>", b"text/html")
            return
        stream = body.get("stream") is True
        if model in ("script-stream-500", "script-stream-500-hold", "script-stream-hold"):
            hold, error = model.endswith("-hold"), "500" in model
            await _stream_error(send, receive, raw, body, hold=hold, error=error)
            return
        if path.endswith("/chat/completions"):
            if stream:
                events, cut = chat_events(raw, body)
                await _stream(send, events, cut)
            else:
                await _respond(send, 200, chat_body(raw, body), b"application/json")
        elif path.endswith("/responses"):
            if stream:
                await _stream(send, responses_events(raw, body))
            else:
                await _respond(send, 200, dump(response(raw, body)), b"application/json")
        elif anthropic:
            if stream:
                events, cut = anthropic_events(raw, body)
                await _stream(send, events, cut)
            else:
                await _respond(send, 200, dump(anthropic_message(raw, body)), b"application/json")
        else:
            await _respond(
                send, 404, b'{"error": {"message": "no such path"}}', b"application/json"
            )

    return app


@contextlib.contextmanager
def model_upstream() -> Iterator[ModelUpstream]:
    """Serve the scripted model on a free port (uvicorn in a thread) until the block ends."""
    sock = bound_socket()
    upstream = ModelUpstream(url=f"http://127.0.0.1:{port_of(sock)}")
    config = uvicorn.Config(
        make_app(upstream), log_level="critical", access_log=False, lifespan="off"
    )
    with serving(config, sock, "the scripted model upstream"):
        yield upstream


if __name__ == "__main__":  # python -m tests.servers.model_upstream PORT  (bench/llm_overhead.py)
    import sys

    serve_port = int(sys.argv[1])
    uvicorn.run(
        make_app(ModelUpstream(url=f"http://127.0.0.1:{serve_port}")),
        host="127.0.0.1",
        port=serve_port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
