"""The spans of one proxied exchange, and how each message coming back is recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from tracecard.server.proxy import tool_annotations
from tracecard.server.proxy.state import ProxyState
from tracecard.server.recording.recorder import DIRECTION, SERVER_TO_CLIENT, Exchange, PendingCall
from tracecard.traces import semconv


@dataclass(slots=True)
class Calls:
    """Open spans of one POST (or of one GET stream, which has none of its own)."""

    exchange: Exchange
    requests: dict[str, PendingCall] = field(default_factory=dict)  # by JSON-RPC id as text
    notifications: list[PendingCall] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # the agent's answers to the server
    unparsable: Span | None = None

    @property
    def anchor(self) -> PendingCall | None:
        """The call that server notifications on this stream belong to (the first request)."""
        return next(iter(self.requests.values()), None)


def traceparent_value(span: Span) -> str:
    """The W3C `traceparent` naming `span` (formatted here: cheaper than the propagator)."""
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def record_message(state: ProxyState, calls: Calls, message: Any) -> None:
    """Record one JSON-RPC message the upstream sent (a response, a notification, a request)."""
    if not isinstance(message, dict):
        return
    recorder = state.recorder
    method = message.get("method")
    if method is None:
        key = str(message.get("id"))
        pending = calls.requests.pop(key, None)
        if pending is None and message.get("id") is None and calls.requests:
            # an error with id null answers the whole body (e.g. a parse error)
            pending = calls.requests.pop(next(iter(calls.requests)))
        if pending is None:  # the answer to a request whose POST stream closed (resumed)
            pending = state.take_resumed(_resume_key(calls, key))
        if pending is None:
            return
        if pending.method == "tools/list":
            _remember_annotations(state, calls.exchange.upstream, message.get("result"))
        recorder.finish(pending, message)
        return
    anchor = calls.anchor
    if message.get("id") is None and anchor is not None:
        recorder.note(anchor, message)  # progress, logging: events on the call they are about
        return
    # a server->client request, or a notification on the GET stream: its own span
    parent = trace.set_span_in_context(anchor.span) if anchor is not None else None
    pending = recorder.start(message, calls.exchange, parent=parent)
    pending.span.set_attribute(DIRECTION, SERVER_TO_CLIENT)
    if message.get("id") is None:
        recorder.finish(pending, None)
        return
    session = calls.exchange.session_id or ""
    state.remember_server_request(
        (calls.exchange.upstream, session, str(message.get("id"))), pending
    )


def record_agent_replies(state: ProxyState, calls: Calls) -> None:
    """The agent's answers to server->client requests close those requests' spans."""
    session = calls.exchange.session_id or ""
    for reply in calls.replies:
        key = (calls.exchange.upstream, session, str(reply.get("id")))
        pending = state.server_requests.pop(key, None)
        if pending is not None:
            state.recorder.finish(pending, reply)
        else:
            state.recorder.reply(reply, calls.exchange)


def _resume_key(calls: Calls, request_id: str) -> tuple[str, str, str]:
    return (calls.exchange.upstream, calls.exchange.session_id or "", request_id)


def await_resumed(state: ProxyState, calls: Calls, deadline: float) -> None:
    """Open requests wait for their answer on a resumed stream, until `deadline` (loop time)."""
    for key, pending in calls.requests.items():
        state.await_resumed(_resume_key(calls, key), pending, deadline)
    calls.requests.clear()


def fail_open(state: ProxyState, calls: Calls, error_type: str, message: str) -> None:
    """Close every span still open with a transport failure."""
    for pending in calls.requests.values():
        state.recorder.fail(pending, error_type, message)
    calls.requests.clear()
    for pending in calls.notifications:
        state.recorder.fail(pending, error_type, message)
    calls.notifications.clear()


def finish_oversize(state: ProxyState, calls: Calls, head: bytes, size: int) -> None:
    """A JSON answer too big to hold was streamed on: its span keeps the start, marked cut."""
    if len(calls.requests) != 1:  # a batch answer cannot be told apart without all of it
        fail_open(state, calls, semconv.ERR_TOO_LARGE, f"a {size}-byte answer was not recorded")
        return
    pending = calls.requests.popitem()[1]
    head_text = head.decode("utf-8", errors="ignore")  # `head` is at most the payload cap
    text = f"{head_text}…[truncated by tracecard: original size {size} bytes]"
    key = semconv.GEN_AI_TOOL_CALL_RESULT if pending.method == "tools/call" else semconv.RPC_RESULT
    pending.span.set_attribute(key, text)
    pending.span.set_attribute(semconv.TRUNCATED, True)
    pending.span.end()


def close_notifications(state: ProxyState, calls: Calls) -> None:
    """Notifications have no response: their spans end once the upstream accepted them."""
    for pending in calls.notifications:
        state.recorder.finish(pending, None)
    calls.notifications.clear()


def _remember_annotations(state: ProxyState, upstream: str, result: Any) -> None:
    tool_annotations.remember(state.annotations, upstream, result)


def end_unparsable(calls: Calls, status: int) -> None:
    """The span of a body that was not JSON-RPC ends with the upstream's status."""
    if calls.unparsable is not None:
        calls.unparsable.set_attribute(semconv.HTTP_RESPONSE_STATUS_CODE, status)
        calls.unparsable.end()
        calls.unparsable = None
