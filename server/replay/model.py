"""Replay on the model side (`/llm/{upstream}/...`): the recorded answer, never the upstream.

OpenAI Chat Completions and Responses, Anthropic Messages (and any other endpoint of a model
upstream): a request is matched as a plain HTTP call is (`METHOD /path` and its JSON body, as
stored, under `$.arguments`), and answered with the recorded status, headers and body, or a
streamed answer's SSE events in their order. The span is recorded as a live one would be
(usage, output, requested tool calls), marked `tracecard.replay = recorded`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tracecard.server.asgi import Send
from tracecard.server.proxy.errors import ProxyError
from tracecard.server.proxy.sse import SseParser
from tracecard.server.recording.genai import record_model_call
from tracecard.server.recording.genai_stream import StreamReader
from tracecard.server.recording.recorder import Recorder
from tracecard.server.replay.http import HttpAnswer, replay_http
from tracecard.server.replay.index import RunReplay
from tracecard.server.replay.model_store import answer_attributes

if TYPE_CHECKING:
    from tracecard.server.recording.genai import ModelExchange


async def replay_model(
    replay: RunReplay, recorder: Recorder, exchange: ModelExchange, send: Send
) -> bool:
    """True when the agent got the recorded answer (or a miss error); False: forward it."""
    answer = replay_http(
        replay,
        recorder,
        exchange.upstream,
        exchange.role,
        exchange.method,
        exchange.path,
        "",  # the query is not part of a model call's key (it is not stored)
        exchange.request_body,
    )
    if answer is None:
        return False
    exchange.extra.update(answer.attributes)
    if not answer.status:
        return False  # on_miss = "live": forwarded, its span marked live
    if answer.error is not None:
        exchange.error, exchange.error_text = answer.error_type, answer.error
        record_model_call(recorder, exchange, time.time_ns())
        raise ProxyError(answer.status, answer.error, reason=answer.error_type)
    exchange.status_code = answer.status
    exchange.response_headers = list(answer.headers)
    if answer.events is not None:
        await _send_events(exchange, send, answer)
    else:
        await _send_whole(exchange, send, answer)
    # stored again: a replayed experiment can be the source of the next replay
    exchange.extra.update(answer_attributes(recorder, exchange))
    record_model_call(recorder, exchange, time.time_ns())
    return True


def _head(answer: HttpAnswer) -> list[tuple[bytes, bytes]]:
    return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers]


async def _send_whole(exchange: ModelExchange, send: Send, answer: HttpAnswer) -> None:
    body = answer.body
    head = [*_head(answer), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": answer.status, "headers": head})
    await send({"type": "http.response.body", "body": body})
    exchange.response_body, exchange.response_size = body, len(body)


async def _send_events(exchange: ModelExchange, send: Send, answer: HttpAnswer) -> None:
    """The events one by one, as a live stream sends them; read for the span as they go."""
    assert answer.events is not None
    exchange.streamed = True
    parser = SseParser()
    reader = StreamReader(exchange.api) if exchange.api is not None else None
    await send({"type": "http.response.start", "status": answer.status, "headers": _head(answer)})
    for event in answer.events:
        await send({"type": "http.response.body", "body": event, "more_body": True})
        exchange.stream_raw += event
        for parsed in parser.feed(event):
            if reader is not None:
                reader.event(parsed.event, parsed.data)
    for parsed in parser.close():
        if reader is not None:
            reader.event(parsed.event, parsed.data)
    await send({"type": "http.response.body", "body": b""})
    if reader is not None:
        exchange.stream_output = reader.finish()
