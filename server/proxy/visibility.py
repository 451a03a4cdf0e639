"""Verifier-only tools: tools an upstream offers for tracecard's probes, never to the agent.

An upstream's `verifier_tools` names them (docs/configuration.md). For agent traffic (anything
that does not present the database's verifier key) the HTTP proxy and the stdio bridge both go
through this module: a `tools/list` answer loses those tools, and a `tools/call` of one is not
forwarded but answered with the JSON-RPC error of an unknown tool (-32602), its span ending with
`error.type = verifier_only_tool` and a status message that says why. Verifier traffic (probes)
sees and calls them as the upstream offers them. The agent's `tools/list` span keeps the
upstream's whole answer and names what was taken out (`tracecard.tools.hidden`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import orjson

from tracecard.server.asgi import Send, jsonrpc_error
from tracecard.server.proxy.sse import SseEvent, SseParser
from tracecard.server.recording.recorder import Exchange, PendingCall, Recorder
from tracecard.server.settings import UpstreamSettings
from tracecard.traces import semconv

__all__ = [
    "CODE_UNKNOWN_TOOL",
    "filter_body",
    "filter_reply",
    "filtering_sse",
    "hidden_call",
    "hidden_for",
    "mark_list",
    "refusal",
    "refuse",
    "shown",
]

CODE_UNKNOWN_TOOL = -32602  # MCP: a tools/call of a tool the server does not have
_NONE: frozenset[str] = frozenset()


def hidden_for(settings: UpstreamSettings | None, role: str) -> frozenset[str]:
    """The tools to hide from this traffic: the upstream's verifier tools, unless it is the
    verifier's own (probes see everything)."""
    if settings is None or not settings.verifier_tools or role == semconv.ROLE_VERIFIER:
        return _NONE
    return frozenset(settings.verifier_tools)


def hidden_call(message: dict[str, Any], hidden: Collection[str]) -> str | None:
    """The hidden tool a `tools/call` request names, else None."""
    if not hidden or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    tool = params.get("name") if isinstance(params, dict) else None
    return tool if isinstance(tool, str) and tool in hidden else None


def refuse(recorder: Recorder, pending: PendingCall, tool: str, upstream: str) -> dict[str, Any]:
    """End the span of an agent's call of a verifier-only tool; the error to answer it with.

    The agent is told what it would be told of a tool that does not exist: nothing it sends
    reaches the tool, and nothing tells it the tool is there."""
    span = pending.span
    span.set_attribute(semconv.RPC_RESPONSE_STATUS_CODE, str(CODE_UNKNOWN_TOOL))
    recorder.fail(
        pending,
        semconv.ERR_VERIFIER_ONLY,
        f"not forwarded: {tool!r} is a verifier-only tool of upstream {upstream!r} "
        "(verifier_tools), hidden from agents",
    )
    return jsonrpc_error(pending.request_id, CODE_UNKNOWN_TOOL, f"Unknown tool: {tool}")


def refusal(
    recorder: Recorder, message: dict[str, Any], exchange: Exchange, hidden: Collection[str]
) -> dict[str, Any] | None:
    """The stdio bridge's check: the refusal of a call of a hidden tool (recorded), else None."""
    tool = hidden_call(message, hidden)
    if tool is None:
        return None
    return refuse(recorder, recorder.start(message, exchange), tool, exchange.upstream)


def shown(reply: dict[str, Any], pending: PendingCall, hidden: Collection[str]) -> dict[str, Any]:
    """The answer as the agent gets it: a `tools/list` result without the hidden tools."""
    return filter_reply(reply, hidden) if pending.method == "tools/list" else reply


def mark_list(pending: PendingCall, hidden: Collection[str]) -> None:
    """Name, on an agent's `tools/list` span, the tools tracecard takes out of the answer."""
    if hidden and pending.method == "tools/list":
        pending.span.set_attribute(semconv.TOOLS_HIDDEN, sorted(hidden))


def _filter_result(result: Any, hidden: Collection[str]) -> Any:
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return result
    tools = result["tools"]
    kept = [t for t in tools if not (isinstance(t, dict) and t.get("name") in hidden)]
    return result if len(kept) == len(tools) else {**result, "tools": kept}


def filter_reply(reply: dict[str, Any], hidden: Collection[str]) -> dict[str, Any]:
    """A `tools/list` response without the hidden tools (the same object when none is in it)."""
    if not hidden or "result" not in reply:
        return reply
    result = _filter_result(reply["result"], hidden)
    return reply if result is reply["result"] else {**reply, "result": result}


def filter_body(body: bytes, list_ids: Iterable[str], hidden: Collection[str]) -> bytes | None:
    """A JSON-RPC body (one message or a batch) with the hidden tools taken out of the answers
    to the requests `list_ids` (JSON-RPC ids as text); None when nothing changed."""
    wanted = set(list_ids)
    if not hidden or not wanted:
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # not JSON: relayed as it came (the recorder says what was wrong)
    messages = parsed if isinstance(parsed, list) else [parsed]
    changed = False
    out = []
    for message in messages:
        if isinstance(message, dict) and "method" not in message:
            if str(message.get("id")) in wanted:
                filtered = filter_reply(message, hidden)
                changed = changed or filtered is not message
                message = filtered
        out.append(message)
    if not changed:
        return None
    return orjson.dumps(out if isinstance(parsed, list) else out[0])


def _frame(event: SseEvent, data: str) -> bytes:
    lines = [f"id: {event.id}"] if event.id is not None else []
    if event.event != "message":
        lines.append(f"event: {event.event}")
    if data:  # an event of an id alone (a priming event) stays one: it sets the id only
        lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def filtering_sse(send: Send, list_ids: Iterable[str], hidden: Collection[str]) -> Send:
    """`send` for an SSE answer that holds `tools/list` responses: each event goes on whole,
    re-framed, with the hidden tools taken out of those responses (comments are dropped)."""
    parser = SseParser()
    wanted = list(list_ids)

    def reframe(events: list[SseEvent]) -> bytes:
        frames = []
        for event in events:
            data = event.data
            if data and event.event == "message":
                shown = filter_body(data.encode(), wanted, hidden)
                data = data if shown is None else shown.decode()
            frames.append(_frame(event, data))
        return b"".join(frames)

    async def filtered(message: Any) -> None:
        if message.get("type") != "http.response.body":
            await send(message)
            return
        events = parser.feed(message.get("body", b""))
        if not message.get("more_body", False):
            events += parser.close()
        await send({**message, "body": reframe(events)})

    return filtered
