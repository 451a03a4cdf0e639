"""Replay on plain HTTP tools (`/http/{upstream}/{path}`): a recorded status, headers and body."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracecard.server.recording.recorder import Recorder, parse_json
from tracecard.server.replay.index import Miss, RunReplay
from tracecard.server.replay.keys import http_key
from tracecard.server.replay.mcp import stored_form
from tracecard.traces import semconv

# The HTTP status of a request replay has no answer for (outside the registered range, like
# the 599 some proxies use for "no response"); the body says what was asked and what is closest.
STATUS_REPLAY_MISS = 599


@dataclass(slots=True)
class HttpAnswer:
    """What the proxy does with one plain HTTP call under replay.

    `status` 0: forward it live (span marked with `attributes`); else answer with `status`,
    `headers` and `body` (a recorded answer, or a miss when `error` is set)."""

    attributes: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    error: str | None = None
    error_type: str = semconv.ERR_REPLAY_MISS
    transform: Callable[[bytes], bytes] | None = None  # forwarded: the body changed (a fault)
    events: list[bytes] | None = None  # a streamed model answer: its SSE events, in order


def _arguments(recorder: Recorder, upstream: str, body: bytes) -> Any:
    if not body:
        return {}
    parsed, problem = parse_json(body)
    if problem is not None:
        text, _ = recorder.redactor_for(upstream).cut(body)
        return {"body": text}
    stored = stored_form(recorder, upstream, parsed)
    return stored if isinstance(stored, dict) else {"body": stored}


def replay_http(
    replay: RunReplay,
    recorder: Recorder,
    upstream: str,
    role: str,
    method: str,
    path: str,
    query: str,
    body: bytes,
) -> HttpAnswer | None:
    """The recorded answer to one plain HTTP call, a miss, or None (this upstream is live)."""
    index = replay.upstreams.get(upstream)
    if index is None:
        return None
    stored_query = recorder.redactor_for(upstream).query(query) if query else ""
    arguments = _arguments(recorder, upstream, body)
    key = http_key(role, method, path, stored_query, arguments, index.policy.ignore)
    found = index.take(key)
    if not isinstance(found, Miss):
        replay.served += 1
        attributes = {
            semconv.REPLAY: semconv.REPLAY_RECORDED,
            semconv.REPLAY_SOURCE_SPAN: found.span_id,
        }
        return HttpAnswer(attributes, found.status, found.headers, found.body, events=found.events)
    attributes = {semconv.REPLAY: semconv.REPLAY_MISS}
    if found.closest is not None:
        attributes[semconv.REPLAY_CLOSEST] = found.closest.key.describe()
    replay.note_miss(found, None)
    if index.policy.on_miss == "live":
        replay.live += 1
        attributes[semconv.REPLAY] = semconv.REPLAY_LIVE
        return HttpAnswer(attributes)
    text = f"tracecard replay: {found.describe()}"
    return HttpAnswer(attributes, STATUS_REPLAY_MISS, error=text)
