"""Faults on the MCP proxy: one POST holding one agent request (`tools/call`, `tools/list`).

A replacing kind answers without forwarding; `latency_ms` waits and lets the proxy forward;
a changing kind forwards here (the whole answer read, JSON or SSE), changes the request's reply
and sends the answer in the form the upstream used. Each faulted request's span carries
`tracecard.fault.kind` and `tracecard.fault.rule` and records what the agent got.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from tracecard.server.asgi import SSE_HEADERS, Send, send_bytes, sse_frame
from tracecard.server.faults.inject import changed_reply, replacement
from tracecard.server.faults.plan import FaultRule, RunFaults
from tracecard.server.mcp_versions import modern_versions
from tracecard.server.proxy import tool_annotations
from tracecard.server.proxy.forward import open_upstream, response_headers, upstream_url
from tracecard.server.proxy.sse import SseParser
from tracecard.server.recording.recorder import PendingCall
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.proxy.calls import Calls
    from tracecard.server.proxy.forward import RequestHeaders
    from tracecard.server.proxy.state import ProxyState


def target_of(message: dict[str, Any]) -> str:
    params = message.get("params")
    return str(params.get("name")) if isinstance(params, dict) else ""


def choose(faults: RunFaults, upstream: str, pending: PendingCall, tool: str) -> FaultRule | None:
    """The rule that fires on this request (agent `tools/call` or `tools/list` only)."""
    if pending.method == "tools/call":
        return faults.check(upstream, tool)
    if pending.method == "tools/list":
        return faults.check(upstream, "", for_list=True)
    return None


def mark(faults: RunFaults, pending: PendingCall, rule: FaultRule, tool: str) -> None:
    """Name the fault on the span and remember it for the run's report."""
    pending.span.set_attribute(semconv.FAULT_KIND, rule.kind)
    pending.span.set_attribute(semconv.FAULT_RULE, rule.id)
    span_id = format(pending.span.get_span_context().span_id, "016x")
    faults.injected.append({"rule": rule.id, "kind": rule.kind, "tool": tool, "span_id": span_id})


def record_reply(state: ProxyState, pending: PendingCall, reply: dict[str, Any], rule: Any) -> None:
    """End the span with what the agent got (a timeout as `error.type = timeout`)."""
    if rule.kind == "timeout":
        state.recorder.fail(pending, semconv.ERR_TIMEOUT, reply["error"]["message"])
    else:
        state.recorder.finish(pending, reply)


# Over a replayed upstream, a changing rule changes the recorded reply (replay/mcp.py sends it)
Change = Callable[[dict[str, Any]], dict[str, Any]]


async def fault_post(
    faults: RunFaults,
    state: ProxyState,
    calls: Calls,
    send: Send,
    started: list[tuple[dict[str, Any], Any]],
    headers: RequestHeaders,
    replayed: bool = False,
) -> bool | Change:
    """True when the agent was answered here; False: the proxy forwards as usual (or replay
    answers); a `Change`: replay answers, with the reply changed by it (`replayed` only)."""
    if calls.exchange.role != semconv.ROLE_AGENT or len(started) != 1:
        return False
    message, pending = started[0]
    upstream = calls.exchange.upstream
    tool = target_of(message)
    rule = choose(faults, upstream, pending, tool)
    if rule is None:
        return False
    mark(faults, pending, rule, tool)
    if rule.kind == "latency_ms":
        await asyncio.sleep(rule.ms / 1000)
        return False
    if rule.ms:
        await asyncio.sleep(rule.ms / 1000)
    calls.requests.clear()
    if rule.kind == "http_status":
        pending.span.set_attribute(semconv.HTTP_RESPONSE_STATUS_CODE, rule.status)
        state.recorder.fail(pending, str(rule.status), f"HTTP {rule.status} (injected)")
        extra = [] if rule.retry_after is None else [(b"retry-after", b"%d" % rule.retry_after)]
        body = orjson.dumps({"error": rule.message, "status": rule.status})
        await send_bytes(send, rule.status, body, b"application/json", extra)
        return True
    reply = replacement(rule, pending.request_id, upstream)
    if reply is not None:
        if "result" in reply and headers.protocol_version in modern_versions():
            reply["result"] = {"resultType": "complete", **reply["result"]}  # the wire needs it
        record_reply(state, pending, reply, rule)
        as_sse = "application/json" not in headers.accept or state.answers_sse.get(upstream, False)
        body = sse_frame(orjson.dumps(reply)) if as_sse else orjson.dumps(reply)
        media = None if as_sse else b"application/json"
        await send_bytes(send, 200, body, media, list(SSE_HEADERS) if as_sse else [])
        return True
    if replayed:
        return functools.partial(_change, faults, state, upstream, pending.method, rule)
    await _forward_changed(faults, state, calls, send, headers, message, pending, rule)
    return True


def _change(
    faults: RunFaults,
    state: ProxyState,
    upstream: str,
    method: str,
    rule: FaultRule,
    reply: dict[str, Any],
) -> dict[str, Any]:
    changed = changed_reply(rule, reply, lambda name: faults.tool_matches(rule, name))
    if method == "tools/list":
        tool_annotations.remember(state.annotations, upstream, changed.get("result"))
    return changed


async def _forward_changed(
    faults: RunFaults,
    state: ProxyState,
    calls: Calls,
    send: Send,
    headers: RequestHeaders,
    message: dict[str, Any],
    pending: PendingCall,
    rule: FaultRule,
) -> None:
    """Forward, read the whole answer, change the request's reply, send it as it came."""
    upstream = state.upstreams[calls.exchange.upstream]
    forward = [(n, v) for n, v in headers.forward if n.lower() != "accept-encoding"]
    forward = [*forward, ("accept-encoding", "identity"), *upstream.extra_headers]
    url = upstream_url(upstream, b"")
    try:
        response = await open_upstream(
            state.client, "POST", url, forward, orjson.dumps(message), upstream.timeout_s
        )
        async with asyncio.timeout(upstream.timeout_s):
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
    except Exception as exc:  # noqa: BLE001 - any failure reaches the agent as the proxy's
        text = f"tracecard: upstream {upstream.name!r} failed ({type(exc).__name__})"
        state.recorder.fail(pending, semconv.ERR_UNAVAILABLE, text)
        reply = {
            "jsonrpc": "2.0",
            "id": pending.request_id,
            "error": {"code": -32000, "message": text},
        }
        await send_bytes(send, 200, orjson.dumps(reply))
        return
    is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
    replies = _messages(raw, is_sse)
    changed: list[dict[str, Any]] = []
    for reply in replies:
        if reply.get("id") == pending.request_id and "method" not in reply:
            reply = changed_reply(rule, reply, lambda name: faults.tool_matches(rule, name))
            if pending.method == "tools/list":
                tool_annotations.remember(state.annotations, upstream.name, reply.get("result"))
            state.recorder.finish(pending, reply)
        changed.append(reply)
    if not any(r.get("id") == pending.request_id for r in replies):
        state.recorder.fail(pending, semconv.ERR_PROTOCOL, "no answer to change")
    head = [
        (n, v) for n, v in response_headers(response.raw_headers) if n.lower() != b"content-length"
    ]
    if is_sse:
        body = b"".join(sse_frame(orjson.dumps(r)) for r in changed)
    else:
        body = orjson.dumps(changed[0]) if len(changed) == 1 else orjson.dumps(changed)
    await send_bytes(send, response.status_code, body, None, head)


def _messages(raw: bytes, is_sse: bool) -> list[dict[str, Any]]:
    if not is_sse:
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return []
        items = parsed if isinstance(parsed, list) else [parsed]
        return [m for m in items if isinstance(m, dict)]
    parser = SseParser(len(raw) + 1)
    events = [*parser.feed(raw), *parser.close()]
    found = []
    for event in events:
        if event.data and event.event == "message":
            try:
                message = orjson.loads(event.data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(message, dict):
                found.append(message)
    return found
