"""What replay needs of a model answer, stored on its `chat` span (docs/replay.md, "Model answers").

The request as the agent sent it (redacted JSON, the key replay matches on), the response headers,
and the answer as the agent got it: a whole body as its text, or a streamed answer's SSE events in
order, each as the bytes that went out. Both go through the upstream's redactor and the payload
cap like every stored body; `tracecard.llm.response.stored` says what that left:

- `whole`: the bytes as sent (after content decoding): replay gives them again, byte for byte;
- `redacted`: a secret value was fingerprinted (that body, or that event, is re-encoded JSON):
  replay gives the stored form, fingerprints and all, so those bytes differ from the original;
- `cut`: over `recording.payload_cap_bytes` (a stream keeps its whole events up to the cap):
  not replayed, a request that finds it is a miss;
- `broken`: the answer broke off (the upstream failed mid-answer, or the agent hung up): not
  replayed either.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import orjson

from tracecard.server.recording.recorder import Recorder, parse_json
from tracecard.server.recording.redaction import REDACTED, Redactor
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.recording.genai import ModelExchange

RESPONSE_HEADER = "http.response.header."
# one SSE event: anything up to a blank line (two line ends in a row: CRLF, LF or a lone CR)
_EVENT = re.compile(rb".*?(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)", re.S)
_DATA = re.compile(rb"^data: ?(.*)$")


def split_events(raw: bytes) -> list[bytes]:
    """`raw` cut after each event's blank line; joined again they are `raw` (a last partial
    event included)."""
    events: list[bytes] = []
    end = 0
    for found in _EVENT.finditer(raw):
        events.append(found.group())
        end = found.end()
    if end < len(raw):
        events.append(raw[end:])
    return events


def _redact_event(redactor: Redactor, event: bytes) -> bytes | None:
    """The event with its JSON data redacted, re-written as `field: value` lines; None when
    nothing in it is a secret (it is then kept byte for byte)."""
    if not redactor.values or not redactor.secret_keys.in_bytes(event):
        return None
    lines = event.splitlines()
    data = [m.group(1) for m in (_DATA.match(line) for line in lines) if m is not None]
    if not data:
        return None
    parsed, problem = parse_json(b"\n".join(data))
    if problem is not None:
        return None
    redacted = redactor.value(parsed)
    if redacted == parsed:
        return None
    fields = [line for line in lines if line and _DATA.match(line) is None]
    return b"\n".join([*fields, b"data: " + orjson.dumps(redacted)]) + b"\n\n"


def _events(redactor: Redactor, raw: bytes) -> tuple[list[str], str]:
    """The stream's events as stored (whole events up to the cap), and how they were kept."""
    kept: list[str] = []
    size = 0
    how = semconv.LLM_STORED_WHOLE
    for event in split_events(raw):
        changed = _redact_event(redactor, event)
        if changed is not None:
            event, how = changed, semconv.LLM_STORED_REDACTED
        size += len(event)
        if size > redactor.cap:
            return kept, semconv.LLM_STORED_CUT
        kept.append(event.decode("utf-8", errors="replace"))
    return kept, how


def _whole(redactor: Redactor, body: bytes, size: int) -> tuple[str, str]:
    """A whole answer's stored text, and how it was kept."""
    if size > len(body) or len(body) > redactor.cap:
        text, _ = redactor.cut(body)
        if size > len(body):
            text = f"{text}…[truncated by tracecard: original size {size} bytes]"
        return text, semconv.LLM_STORED_CUT
    parsed, problem = parse_json(body) if redactor.values else (None, "not redacted")
    if problem is None and redactor.value(parsed) != parsed:
        text, cut = redactor.text(parsed)
        return text, semconv.LLM_STORED_CUT if cut else semconv.LLM_STORED_REDACTED
    return body.decode("utf-8", errors="replace"), semconv.LLM_STORED_WHOLE


def answer_attributes(recorder: Recorder, exchange: ModelExchange) -> dict[str, Any]:
    """The attributes that let replay give this exchange's answer again (none without
    `recording.model_content`: the answer is content)."""
    if not recorder.settings.model_content:
        return {}
    redactor = recorder.redactor_for(exchange.upstream)
    found: dict[str, Any] = {}
    if exchange.request_body:
        parsed, problem = parse_json(exchange.request_body)
        if problem is None:
            found[semconv.REQUEST_BODY], _ = redactor.text(parsed)
        else:
            found[semconv.REQUEST_BODY], _ = redactor.cut(exchange.request_body)
    for name, value in exchange.response_headers:
        lowered = name.lower()
        secret = lowered in redactor.headers or lowered == "set-cookie"
        found[RESPONSE_HEADER + lowered] = REDACTED if secret else value
    if exchange.status_code is None:
        return found  # nothing came back: the span's error says why
    if exchange.error is not None or exchange.client_disconnected:
        found[semconv.LLM_RESPONSE_STORED] = semconv.LLM_STORED_BROKEN
        return found
    if exchange.streamed and exchange.api is not None:
        events, how = _events(redactor, bytes(exchange.stream_raw))
        found[semconv.LLM_RESPONSE_EVENTS] = orjson.dumps(events).decode()
    else:
        text, how = _whole(redactor, exchange.response_body, exchange.response_size)
        found[semconv.RESPONSE_BODY] = text
    found[semconv.LLM_RESPONSE_STORED] = how
    return found
