"""Replay on the MCP proxy (`/mcp/{upstream}`): answer a POST's requests from the recording.

Called by the proxy after its spans are open and enforce mode had its say; returns True when
the agent has been answered (nothing was forwarded). A request with no recorded answer is a
JSON-RPC error (`on_miss = "error"`) or makes the whole POST go live (`on_miss = "live"`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from tracecard.server.asgi import SSE_HEADERS, Send, jsonrpc_error, send_bytes, sse_frame
from tracecard.server.mcp_versions import modern_versions
from tracecard.server.proxy import tool_annotations
from tracecard.server.recording.recorder import PendingCall, Recorder, message_target
from tracecard.server.replay.index import Miss, Recorded, RunReplay
from tracecard.server.replay.keys import RequestKey, mcp_key
from tracecard.server.replay.live import REPLAY_SESSION_PREFIX, go_live
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.proxy.calls import Calls
    from tracecard.server.proxy.forward import RequestHeaders
    from tracecard.server.proxy.state import ProxyState

# The JSON-RPC error code of a request replay has no answer for (server-defined range).
CODE_REPLAY_MISS = -32010
_BY_METHOD = frozenset({"initialize", "server/discover", "ping"})


def stored_form(recorder: Recorder, upstream: str, value: Any) -> Any:
    """`value` as the recorder would have stored it (redacted), parsed back."""
    text, _ = recorder.redactor_for(upstream).text(value)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def live_key(
    recorder: Recorder, upstream: str, role: str, message: dict[str, Any], ignore: list[str]
) -> RequestKey:
    """The key of a live MCP request, its arguments in their stored form."""
    method = str(message.get("method") or "unknown")
    params = message.get("params")
    if method == "tools/call" and isinstance(params, dict):
        arguments = stored_form(recorder, upstream, params.get("arguments") or {})
        return mcp_key(role, method, str(params.get("name")), {"arguments": arguments}, ignore)
    if params is not None and method not in _BY_METHOD and not method.startswith("notifications/"):
        params = stored_form(recorder, upstream, params)
    return mcp_key(role, method, message_target(message), params, ignore)


def span_id_of(pending: PendingCall) -> str:
    return format(pending.span.get_span_context().span_id, "016x")


def mark_recorded(pending: PendingCall, found: Recorded) -> None:
    pending.span.set_attribute(semconv.REPLAY, semconv.REPLAY_RECORDED)
    pending.span.set_attribute(semconv.REPLAY_SOURCE_SPAN, found.span_id)


def answer_miss(
    recorder: Recorder, replay: RunReplay, pending: PendingCall, miss: Miss
) -> dict[str, Any]:
    """End a missed request's span (`error.type = replay_miss`); the JSON-RPC error to send."""
    text = f"tracecard replay: {miss.describe()}"
    pending.span.set_attribute(semconv.REPLAY, semconv.REPLAY_MISS)
    if miss.closest is not None:
        pending.span.set_attribute(semconv.REPLAY_CLOSEST, miss.closest.key.describe())
        pending.span.set_attribute(semconv.REPLAY_SOURCE_SPAN, miss.closest.span_id)
    replay.note_miss(miss, span_id_of(pending))
    recorder.fail(pending, semconv.ERR_REPLAY_MISS, text)
    return jsonrpc_error(pending.request_id, CODE_REPLAY_MISS, text, reason="replay_miss")


def recorded_reply(found: Recorded, request_id: Any) -> dict[str, Any]:
    answer = found.message if found.message is not None else {"result": {}}
    return {"jsonrpc": "2.0", "id": request_id, **answer}


async def replay_post(
    replay: RunReplay,
    state: ProxyState,
    calls: Calls,
    send: Send,
    started: list[tuple[dict[str, Any], Any]],
    headers: RequestHeaders,
    batch: bool,
    change: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> bool:
    """Answer every request of one POST from the recording; False: forward it live.

    `change`: a fault rule fired on the POST's one request; its recorded reply is changed."""
    upstream = calls.exchange.upstream
    index = replay.upstreams.get(upstream)
    if index is None:
        return False
    recorder, role = state.recorder, calls.exchange.role
    outcomes: list[tuple[dict[str, Any], PendingCall, Recorded | Miss | None]] = []
    for message, pending in started:
        if pending.request_id is None:  # a notification: nothing to answer
            outcomes.append((message, pending, None))
            continue
        key = live_key(recorder, upstream, role, message, index.policy.ignore)
        outcomes.append((message, pending, index.take(key)))
    missed = [found for _m, _p, found in outcomes if isinstance(found, Miss)]
    if missed and index.policy.on_miss == "live":
        for _message, pending, found in outcomes:
            pending.span.set_attribute(semconv.REPLAY, semconv.REPLAY_LIVE)
            if isinstance(found, Miss):
                replay.note_miss(found, span_id_of(pending))
                replay.live += 1
                if found.closest is not None:
                    pending.span.set_attribute(semconv.REPLAY_CLOSEST, found.closest.key.describe())
        await go_live(state, replay, upstream, headers)
        return False
    replies: list[dict[str, Any]] = []
    session: str | None = None
    for message, pending, found in outcomes:
        if found is None:
            pending.span.set_attribute(semconv.REPLAY, semconv.REPLAY_RECORDED)
            recorder.finish(pending, None)
        elif isinstance(found, Miss):
            replies.append(answer_miss(recorder, replay, pending, found))
        else:
            reply = recorded_reply(found, pending.request_id)
            if change is not None:
                reply = change(reply)
            mark_recorded(pending, found)
            replay.served += 1
            if pending.method == "tools/list":
                tool_annotations.remember(state.annotations, upstream, reply.get("result"))
            elif message.get("method") == "initialize" and not headers.session_id:
                session = f"{REPLAY_SESSION_PREFIX}{secrets.token_hex(12)}"
                params = message.get("params")
                replay.handshakes[session] = params if isinstance(params, dict) else {}
                pending.span.set_attribute(semconv.MCP_SESSION_ID, session)
            recorder.finish(pending, reply)
            replies.append(reply)
    calls.requests.clear()
    calls.notifications.clear()
    extra = [(b"mcp-session-id", session.encode())] if session else []
    if not replies:
        await send_bytes(send, 202, b"", None, extra)
    elif _as_sse(headers):
        body = b"".join(sse_frame(orjson.dumps(reply)) for reply in replies)
        await send_bytes(send, 200, body, None, [*SSE_HEADERS, *extra])
    else:
        body = orjson.dumps(replies if batch else replies[0])
        await send_bytes(send, 200, body, b"application/json", extra)
    return True


def _as_sse(headers: RequestHeaders) -> bool:
    """Answer as SSE events when the agent takes them and speaks the session protocol (as the
    SDK servers do), or takes nothing else; the stateless protocol's answers are plain JSON."""
    if "text/event-stream" not in headers.accept:
        return False
    if "application/json" not in headers.accept:
        return True
    return headers.protocol_version not in modern_versions()


async def replay_other(send: Send, method: str) -> None:
    """GET and DELETE of a replayed upstream: no server stream is offered, a session just ends."""
    if method == "DELETE":
        await send_bytes(send, 200, b"", None)
        return
    await send_bytes(send, 405, b"", None, [(b"allow", b"POST, DELETE")])
