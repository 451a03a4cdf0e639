"""Relaying the upstream's response to the agent: bodies and SSE streams, chunk by chunk.

Each chunk is handed to the server before it is looked at. The server sends what one loop turn
wrote at the end of that turn (`server/http_protocol.py`), so an SSE event leaves once the turn
has also recorded what it answered (~20 us): by then the upstream's end of the stream has
usually arrived, and goes out in the same write. Closing the spans in a callback after the
turn's write instead was measured and dropped (docs/PERFORMANCE.md, "#24, afternoon"): the
event left sooner, but the end came in its own write after its own wakeup, 3 % more CPU a call.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from yarl import URL

from tracecard.server.asgi import CODE_UPSTREAM, Receive, Send, jsonrpc_error, sse_frame
from tracecard.server.proxy.calls import Calls, await_resumed, fail_open, record_message
from tracecard.server.proxy.forward import response_headers
from tracecard.server.proxy.sse import SseEventTooLarge, SseParser
from tracecard.server.proxy.state import ProxyState
from tracecard.server.proxy.stream_watch import DISCONNECTED, StreamWatch
from tracecard.server.proxy.transport import Answer, UpstreamClient
from tracecard.traces import semconv

# Non-streaming bodies up to this size are read whole before the agent gets the head.
BUFFER_MAX = 16 * 1024 * 1024
# The proxy's own deadline (asyncio). A connect that timed out is the upstream being
# unavailable (`UpstreamConnectTimeout`, an aiohttp.ClientError), not this.
TIMEOUT_ERRORS = (TimeoutError,)
# What breaks a stream midway: the upstream died, reset the connection or sent garbage.
STREAM_ERRORS = (aiohttp.ClientError, OSError)


class Decoder:
    """Decodes a compressed body for recording only (the agent gets it as it was sent)."""

    __slots__ = ("_inflate", "problem")

    def __init__(self, encoding: str) -> None:
        self._inflate: Any = None
        self.problem: str | None = None
        encoding = encoding.strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
        elif encoding not in ("", "identity"):
            self.problem = f"content-encoding {encoding!r} is not decoded for recording"

    def feed(self, chunk: bytes) -> bytes:
        if self._inflate is None:
            return chunk
        try:
            return bytes(self._inflate.decompress(chunk))
        except zlib.error as exc:
            self.problem = f"could not decompress the response: {exc}"
            self._inflate = None
            return b""


def decoder_for(encoding: str | None) -> Decoder | None:
    """The decoder of a `Content-Encoding` value; None when there is nothing to decode."""
    return Decoder(encoding) if encoding and encoding.strip() else None


@dataclass(slots=True)
class Relayed:
    """What `fetch` passed on: the body's first bytes, its size, and how it ended."""

    kept: bytes = b""  # the whole body when `whole`, else its first `keep` bytes (for the span)
    size: int = 0  # bytes received from the upstream
    whole: bool = False
    error: str | None = None  # `timeout` or `upstream_protocol_error` (cut, reset, garbage)
    head_sent: bool = False  # False: the agent has nothing yet, answer it with an error
    chunks: list[bytes] = field(default_factory=list)  # while it is read


@dataclass(slots=True)
class Fetched:
    """One upstream request under one deadline: the answer's head and, unless it streams
    (SSE, read by `relay_sse`), its body; or why no head came (`failure`)."""

    response: Answer | None = None
    relayed: Relayed | None = None  # None: an SSE answer, or no answer
    failure: BaseException | None = None  # TimeoutError or a transport error, before the head

    @property
    def timed_out(self) -> bool:
        return isinstance(self.failure, TimeoutError)


def is_event_stream(response: Answer) -> bool:
    return response.headers.get("Content-Type", "").startswith("text/event-stream")


async def fetch(
    client: UpstreamClient,
    method: str,
    url: URL,
    forward: list[tuple[str, str]],
    body: bytes,
    send: Send,
    deadline: float | None,
    keep: int,
    sse: bool = True,
) -> Fetched:
    """Send the request and read a non-streaming answer, all under the one `deadline`.

    Up to `BUFFER_MAX` bytes are read before anything is sent, so a body cut short (or a length
    the upstream got wrong) becomes an error the caller can answer with, not a cut 200: a whole
    body is returned unsent (`send_whole` passes it on). A longer one streams on after its first
    `BUFFER_MAX` bytes, and only its first `keep` bytes are kept. With `sse`, an event stream
    is returned unread.
    """
    fetched = Fetched()
    try:  # the head, under the deadline (the client's own timer on the wire path)
        fetched.response = response = await client.request(method, url, forward, body, deadline)
    except STREAM_ERRORS as exc:  # TimeoutError among them (an OSError)
        fetched.failure = exc
        return fetched
    if sse and is_event_stream(response):
        return fetched
    fetched.relayed = relayed = Relayed()
    whole = response.take_whole(BUFFER_MAX)
    if whole is not None:  # it had all arrived with the head: nothing to wait for
        relayed.size = len(whole)
        relayed.chunks.append(whole)
    else:
        try:
            async with asyncio.timeout_at(deadline):
                await _read_body(response, send, keep, relayed)
        except TimeoutError:
            relayed.error = semconv.ERR_TIMEOUT
    chunks = relayed.chunks
    whole = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    relayed.chunks = []
    if relayed.error is not None or relayed.head_sent:
        relayed.kept = whole[:keep]
    else:
        relayed.kept, relayed.whole = whole, True
    return fetched


async def _read_body(response: Answer, send: Send, keep: int, relayed: Relayed) -> None:
    chunks = relayed.chunks
    read = response.read_chunk
    try:
        while chunk := await read():
            relayed.size += len(chunk)
            if relayed.head_sent:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                continue
            chunks.append(chunk)
            if relayed.size > BUFFER_MAX:  # too big to hold: stream the rest, keep the start
                headers = response_headers(response.raw_headers)
                start = {"type": "http.response.start", "status": response.status_code}
                await send({**start, "headers": headers})
                relayed.head_sent = True
                held = b"".join(chunks)
                await send({"type": "http.response.body", "body": held, "more_body": True})
                chunks[:] = [held[:keep]]
        if relayed.head_sent:
            await send({"type": "http.response.body", "body": b""})
    except STREAM_ERRORS:
        relayed.error = semconv.ERR_PROTOCOL
    finally:
        await response.aclose()  # a body read to its end returns the connection to the pool


async def send_whole(
    send: Send, status: int, raw_headers: tuple[tuple[bytes, bytes], ...], body: bytes
) -> None:
    """The upstream's status and headers with a body read whole (its real length declared)."""
    headers = response_headers(raw_headers, len(body))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def relay_sse(
    state: ProxyState,
    calls: Calls,
    response: Answer,
    receive: Receive,
    send: Send,
    deadline: float | None,
) -> None:
    """Stream the events on as they arrive, recording each one after it went out."""
    parser = SseParser(state.runtime.settings.max_sse_event_bytes)
    decoder = decoder_for(response.headers.get("Content-Encoding"))
    watcher = StreamWatch(receive, calls, state.runtime.draining)
    error: str | None = None
    event_id: str | None = None  # the last event id seen: the client may resume after it
    tail = b""  # the last byte the agent got
    read = response.read_chunk
    try:
        async with asyncio.timeout_at(deadline) as timer:
            while chunk := await read():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                tail = chunk[-1:] or tail
                try:
                    events = parser.feed(chunk if decoder is None else decoder.feed(chunk))
                except SseEventTooLarge as too_large:
                    events, error = too_large.events, semconv.ERR_TOO_LARGE
                    _mark_cut(state, calls, too_large)
                for event in events:
                    event_id = event.id if event.id is not None else event_id
                    if event.data and event.event == "message":
                        _record_event(state, calls, event.data)
                if error is not None:
                    break  # the agent has half an event: it is ended and answered below
                if deadline is not None and not calls.requests:
                    timer.reschedule(None)  # answered: the rest of the stream has no deadline
                    deadline = None
    except TIMEOUT_ERRORS:
        error = semconv.ERR_TIMEOUT
    except STREAM_ERRORS:
        error = semconv.ERR_PROTOCOL
    except asyncio.CancelledError:
        task = asyncio.current_task()
        reason = watcher.fired()
        if reason is None or task is None:
            await response.aclose()
            raise
        task.uncancel()  # the agent went away, or the server drains: stop reading
        await response.aclose()
        if reason == DISCONNECTED:
            fail_open(state, calls, DISCONNECTED, "the agent disconnected")
            return
        await send({"type": "http.response.body", "body": b""})
        return
    finally:
        watcher.cancel()
    await response.aclose()  # returns the connection to the pool only if the body ended
    if error is None:
        for event in parser.close():
            event_id = event.id if event.id is not None else event_id
            if event.data and event.event == "message":
                _record_event(state, calls, event.data)
        if calls.requests and event_id is not None and deadline is not None:
            # SEP-1699: the upstream closed after an event id, so the client resumes over GET
            # with Last-Event-ID; the answer arriving there closes these spans
            await_resumed(state, calls, deadline)
        elif calls.requests:
            error = semconv.ERR_PROTOCOL  # the stream ended without answering every request
    if error is not None and calls.requests:
        partial = parser.incomplete or error == semconv.ERR_TOO_LARGE
        await _answer_open_requests(state, calls, send, error, tail if partial else None)
    await send({"type": "http.response.body", "body": b""})
    if error is not None:
        fail_open(state, calls, error, _failure_text(calls.exchange.upstream, error))


def _record_event(state: ProxyState, calls: Calls, data: str) -> None:
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    if isinstance(message, list):
        for item in message:
            record_message(state, calls, item)
    else:
        record_message(state, calls, message)


async def _answer_open_requests(
    state: ProxyState, calls: Calls, send: Send, error: str, half_sent: bytes | None
) -> None:
    """Requests left without an answer get a JSON-RPC error event, so the agent does not hang."""
    text = _failure_text(calls.exchange.upstream, error)
    frames = [] if half_sent is None else [end_half_event(half_sent)]
    for pending in calls.requests.values():
        reply = jsonrpc_error(pending.request_id, CODE_UPSTREAM, text, reason=error)
        frames.append(sse_frame(orjson.dumps(reply)))
    await send({"type": "http.response.body", "body": b"".join(frames), "more_body": True})


CUT_EVENT = b"tracecard-cut"  # the type a half-sent event is given: clients ignore it


def end_half_event(tail: bytes) -> bytes:
    """Bytes that end the event the agent got half of, as an event of type `tracecard-cut`.

    An event is dispatched at a blank line; ending it with one would hand the agent the cut
    JSON as a message. A last `event:` line makes it a type that MCP clients (and a browser's
    `onmessage`) skip, so the agent's next message is tracecard's error. `tail` is the last
    byte the agent got: after a line end no other is added (that would be the blank line).
    """
    line_end = b"" if tail == b"\n" else b"\n"  # after a lone CR, LF joins it (one CRLF)
    return line_end + b"event: " + CUT_EVENT + b"\n\n"


def _mark_cut(state: ProxyState, calls: Calls, too_large: SseEventTooLarge) -> None:
    """The open calls' spans keep the start of the event that was too long, marked cut."""
    cap = state.recorder.redactor.cap
    head = too_large.head[:cap].decode("utf-8", errors="ignore")
    marker = f"…[truncated by tracecard: an SSE event over {too_large.limit} bytes, stream ended]"
    for pending in [*calls.requests.values(), *calls.notifications]:
        pending.span.set_attribute(semconv.RESPONSE_BODY, head + marker)
        pending.span.set_attribute(semconv.TRUNCATED, True)


def _failure_text(upstream: str, error: str) -> str:
    if error == semconv.ERR_TOO_LARGE:
        return (
            f"tracecard: upstream {upstream!r} sent an SSE event longer than "
            "max_sse_event_bytes; the stream was ended"
        )
    if error == semconv.ERR_TIMEOUT:
        return f"tracecard: upstream {upstream!r} did not answer in time"
    if error == semconv.ERR_PROTOCOL:
        return f"tracecard: upstream {upstream!r} ended the stream before answering"
    return f"tracecard: upstream {upstream!r} failed ({error})"
