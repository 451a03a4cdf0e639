"""Enforce mode: ask the safety hook about each tool call and answer instead of forwarding.

One decision and one answer for every upstream kind that carries MCP: the HTTP proxy
(`enforce_calls`, per POST, batches included) and the stdio bridge (`blocked`, per request,
shared and `per_run` processes) both ask `decide` and end the span with `block_call`, so a
blocked call gets the same JSON-RPC error, the same span attributes (`error.type = blocked`,
`tracecard.blocked.rule`) and the same safety verdict, whichever way it came. Plain HTTP
upstreams (`/http/...`) ask `decide_call` with the name the scorers give such a call
(`METHOD /path`) and its JSON body as sent, and answer a blocked request with HTTP 403
(server/proxy/http.py).
"""

from __future__ import annotations

from typing import Any

from tracecard.server.asgi import CODE_BLOCKED, Send, jsonrpc_error, send_jsonrpc
from tracecard.server.proxy.calls import Calls
from tracecard.server.proxy.forward import RequestHeaders
from tracecard.server.proxy.state import ProxyState
from tracecard.server.proxy.visibility import hidden_for, mark_list, refuse
from tracecard.server.recording.recorder import PendingCall, Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runtime import Runtime
from tracecard.traces import semconv

Started = list[tuple[dict[str, Any], Any]]  # (message, its PendingCall) per request sent


def decide_call(
    runtime: Runtime,
    run: RunInfo,
    upstream: str,
    tool: str,
    arguments: dict[str, Any] | None,
    annotations: dict[str, Any] | None,
) -> Any:
    """The enforce hook's decision on one call of `tool` (a `BlockDecision`), None to let it go."""
    enforce = runtime.hooks.enforce
    return None if enforce is None else enforce(run, upstream, tool, arguments, annotations)


def blocked_text(decision: Any) -> str:
    """What the agent is told of a blocked call (JSON-RPC error message or HTTP `detail`)."""
    return f"blocked by tracecard rule {decision.rule_id}: {decision.message}"


def decide(
    runtime: Runtime,
    run: RunInfo,
    upstream: str,
    message: dict[str, Any],
    annotations: dict[str, Any] | None,
) -> Any:
    """The enforce hook's decision on one message (a `BlockDecision`), None to forward it."""
    if message.get("method") != "tools/call":
        return None
    found = message.get("params")
    params: dict[str, Any] = found if isinstance(found, dict) else {}
    tool, arguments = str(params.get("name")), params.get("arguments") or {}
    return decide_call(runtime, run, upstream, tool, arguments, annotations)


def block_call(recorder: Recorder, pending: PendingCall, decision: Any) -> dict[str, Any]:
    """End the span of a call enforce mode did not forward; the JSON-RPC error to answer with."""
    text = blocked_text(decision)
    recorder.block(pending, str(decision.rule_id), text)
    return jsonrpc_error(pending.request_id, CODE_BLOCKED, text, rule=decision.rule_id)


Decisions = tuple[dict[int, Any], dict[int, str]]  # blocked: index -> decision; refused: -> tool


def enforce_decisions(
    state: ProxyState, calls: Calls, started: Started, headers: RequestHeaders
) -> Decisions | None:
    """The calls to block or refuse (`answer_enforced` answers them); None: forward them all.

    Without a coroutine: the proxy asks this on every POST, and almost every POST goes on."""
    enforce = state.runtime.hooks.enforce
    upstream = calls.exchange.upstream
    hidden = hidden_for(state.runtime.settings.upstreams.get(upstream), headers.role)
    if enforce is None and not hidden:
        return None
    verdicts: dict[int, Any] = {}
    refused: dict[int, str] = {}
    run = calls.exchange.run
    for index, (message, pending) in enumerate(started):
        if hidden:
            mark_list(pending, hidden)
        if pending.method != "tools/call":
            continue
        found = message.get("params")
        params: dict[str, Any] = found if isinstance(found, dict) else {}
        tool = str(params.get("name"))
        if tool in hidden:
            refused[index] = tool
            continue
        if enforce is None:
            continue
        annotations = state.tool_annotations(upstream, tool)
        decision = enforce(run, upstream, tool, params.get("arguments") or {}, annotations)
        if decision is not None:
            verdicts[index] = decision
    if not verdicts and not refused:
        return None
    return verdicts, refused


async def answer_enforced(
    state: ProxyState,
    calls: Calls,
    send: Send,
    started: Started,
    headers: RequestHeaders,
    batch: bool,
    decisions: Decisions,
) -> None:
    """End the spans of a POST with a blocked or refused call and answer the agent: nothing of
    it is forwarded (no partial effects of a batch)."""
    verdicts, refused = decisions
    upstream = calls.exchange.upstream
    replies = []  # a batch with one blocked call is not forwarded at all: no partial effects
    for index, (_message, pending) in enumerate(started):
        decision = verdicts.get(index)
        if index in refused:
            reply = refuse(state.recorder, pending, refused[index], upstream)
            if pending.request_id is not None:
                replies.append(reply)
            continue
        if decision is not None:
            reply = block_call(state.recorder, pending, decision)
        else:
            text = "not forwarded: another call in this batch was blocked or refused"
            state.recorder.fail(pending, semconv.ERR_BLOCKED, text)
            reply = jsonrpc_error(pending.request_id, CODE_BLOCKED, text, rule=None)
        if pending.request_id is not None:
            replies.append(reply)
    calls.requests.clear()
    calls.notifications.clear()
    as_sse = "application/json" not in headers.accept or state.answers_sse.get(upstream, False)
    if replies:
        await send_jsonrpc(send, replies, batch, as_sse)
    else:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
