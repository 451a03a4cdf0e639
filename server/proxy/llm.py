"""The model side: `/llm/{upstream}/{path}` passes OpenAI- and Anthropic-compatible APIs through.

Every byte goes to the agent as the upstream sent it, chunk by chunk; the recorder reads a copy
afterwards (SSE events are parsed after each chunk went out). The agent's own API key is
forwarded (and stored redacted); tracecard's token is never forwarded. docs/llm.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from tracecard.server.asgi import Receive, Scope, Send, read_body
from tracecard.server.proxy.errors import ProxyError
from tracecard.server.proxy.forward import (
    open_upstream,
    response_headers,
    scan_request_headers,
    upstream_url,
)
from tracecard.server.proxy.relay import STREAM_ERRORS, TIMEOUT_ERRORS, Decoder
from tracecard.server.proxy.sessions import choose_run
from tracecard.server.proxy.sse import SseEventTooLarge, SseParser
from tracecard.server.proxy.state import ProxyState, Upstream
from tracecard.server.proxy.stream_watch import watch_disconnect
from tracecard.server.proxy.transport import UpstreamResponse
from tracecard.server.recording.genai import ModelExchange, record_model_call
from tracecard.server.recording.genai_output import api_of
from tracecard.server.recording.genai_stream import StreamReader
from tracecard.traces import semconv

# A whole body is kept for the span up to this size (a model answer is rarely near it).
_KEEP_MAX = 8 * 1024 * 1024


async def handle_llm(
    state: ProxyState,
    scope: Scope,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    path_run: str | None,
    path: str,
) -> None:
    """Forward one model API request and record it as one span."""
    headers = scan_request_headers(scope["headers"], state.runtime.verifier_key)
    run = await choose_run(state, scope, upstream, headers, path_run, None)
    body = await read_body(receive, state.runtime.settings.max_body_bytes, headers.content_length)
    start_ns = time.time_ns()
    raw_query: bytes = scope.get("query_string", b"")
    forward = headers.forward + upstream.extra_headers
    exchange = ModelExchange(
        run=run,
        upstream=upstream.name,
        provider=upstream.settings.kind,
        api=api_of(upstream.settings.kind, path),
        method=scope["method"],
        path=path,
        request_body=body,
        start_ns=start_ns,
        headers=headers.forward,
        trace_headers=headers.trace_headers,
        role=headers.role,
        role_header=headers.role_header,
        server_address=upstream.host,
        server_port=upstream.port,
    )
    environment = state.runtime.hooks.environment  # replay: the recorded answer, no upstream
    if environment is not None and await environment.llm(state.recorder, exchange, send):
        return
    backoff = state.runtime.hooks.model_backoff  # a 429 on any worker holds this key
    if backoff is not None:
        await backoff.hold(upstream.name)
    url = upstream_url(upstream, raw_query, path)
    try:
        response = await open_upstream(
            state.client, scope["method"], url, forward, body, upstream.timeout_s
        )
    except (*TIMEOUT_ERRORS, *STREAM_ERRORS) as exc:
        _failed(exchange, upstream, exc, started=False)
        record_model_call(state.recorder, exchange, time.time_ns())
        timed_out = exchange.error == semconv.ERR_TIMEOUT
        raise ProxyError(504 if timed_out else 502, exchange.error_text) from None
    exchange.status_code = response.status_code
    exchange.response_headers = response.items()
    if backoff is not None and response.status_code == 429:  # before the agent can retry
        retry_after, date = response.headers.get("retry-after"), response.headers.get("date")
        await backoff.observe(upstream.name, 429, retry_after, date)
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": response_headers(response.raw_headers),
        }
    )
    streamed = response.headers.get("content-type", "").startswith("text/event-stream")
    exchange.streamed = streamed
    if streamed and exchange.api is not None:
        limit = state.runtime.settings.max_sse_event_bytes
        complete = await _relay_stream(response, receive, send, upstream, exchange, limit)
    else:
        complete = await _relay_whole(response, send, upstream, exchange)
    end_ns = time.time_ns()
    if complete:  # the agent has the whole answer before anything is recorded
        await send({"type": "http.response.body", "body": b""})
    # else: the body is left unended, so the server closes the connection and the agent sees
    # the upstream's failure as it would have on a direct connection (not a clean end)
    if environment is not None:  # what replay needs to give this answer again
        exchange.extra.update(environment.model_answer(state.recorder, exchange))
    record_model_call(state.recorder, exchange, end_ns)


async def _relay_whole(
    response: UpstreamResponse, send: Send, upstream: Upstream, exchange: ModelExchange
) -> bool:
    """Send the body on as it arrives; keep a decoded copy. False when the upstream broke off."""
    decoder = Decoder(response.headers.get("Content-Encoding", ""))
    kept: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(upstream.timeout_s):
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                size += len(chunk)
                if size <= _KEEP_MAX:
                    kept.append(decoder.feed(chunk))
    except (*TIMEOUT_ERRORS, *STREAM_ERRORS) as exc:
        _failed(exchange, upstream, exc)
        return False
    finally:
        await response.aclose()
    exchange.response_body = b"".join(kept)
    exchange.response_size = len(exchange.response_body) if size <= _KEEP_MAX else size
    return True


async def _relay_stream(
    response: UpstreamResponse,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    exchange: ModelExchange,
    max_event_bytes: int,
) -> bool:
    """Stream SSE on event by event; read each event after its bytes went out.

    The upstream's timeout bounds the wait for each chunk, not the whole (long) generation.
    An event longer than `max_event_bytes` ends the stream as a broken upstream would.
    """
    assert exchange.api is not None
    parser = SseParser(max_event_bytes)
    reader = StreamReader(exchange.api)
    decoder = Decoder(response.headers.get("Content-Encoding", ""))
    loop = asyncio.get_running_loop()
    watcher = watch_disconnect(receive)
    complete = True
    idle = upstream.timeout_s
    step = min(1.0, idle / 4)  # the deadline moves in steps: a reschedule per chunk costs CPU
    unread = b""  # a chunk on its way to the agent, not yet read for the span
    try:
        async with asyncio.timeout(idle) as timer:
            moved = loop.time()
            async for chunk in response.aiter_raw():
                unread = chunk
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                now = loop.time()
                if now - moved >= step:
                    timer.reschedule(now + idle)
                    moved = now
                unread = b""
                data = decoder.feed(chunk)
                if len(exchange.stream_raw) <= _KEEP_MAX:  # for replay (server/replay)
                    exchange.stream_raw += data
                for event in parser.feed(data):
                    reader.event(event.event, event.data)
        for event in parser.close():
            reader.event(event.event, event.data)
    except SseEventTooLarge as too_large:
        for event in too_large.events:
            reader.event(event.event, event.data)
        exchange.error = semconv.ERR_TOO_LARGE
        exchange.error_text = (
            f"upstream {upstream.name!r} sent an SSE event over {too_large.limit} bytes "
            "(max_sse_event_bytes): the stream was ended"
        )
        complete = False
    except (*TIMEOUT_ERRORS, *STREAM_ERRORS) as exc:
        _failed(exchange, upstream, exc)
        complete = False
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if watcher.fired() is None or task is None:
            raise
        task.uncancel()  # the agent went away: stop reading (the model stops generating)
        # what the upstream sent so far is read all the same: an error event the agent hung up
        # on stays the span's error (docs/llm.md#errors)
        with contextlib.suppress(SseEventTooLarge):
            for event in [*parser.feed(decoder.feed(unread)), *parser.close()]:
                reader.event(event.event, event.data)
        exchange.client_disconnected = True
        complete = False
    finally:
        watcher.cancel()
        await response.aclose()
    exchange.stream_output = reader.finish()
    return complete


def _failed(
    exchange: ModelExchange, upstream: Upstream, exc: BaseException, started: bool = True
) -> None:
    """The exchange's transport error: before the head (unavailable) or during the body."""
    name = f"upstream {upstream.name!r}"
    if isinstance(exc, TIMEOUT_ERRORS):
        exchange.error = semconv.ERR_TIMEOUT
        exchange.error_text = f"{name} sent nothing for {upstream.timeout_s}s"
    elif started:
        exchange.error = semconv.ERR_PROTOCOL
        exchange.error_text = f"{name} broke off the response ({type(exc).__name__})"
    else:
        exchange.error = semconv.ERR_UNAVAILABLE
        exchange.error_text = f"{name} is unavailable ({type(exc).__name__}: {exc})"
