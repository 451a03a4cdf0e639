"""The MCP streamable-HTTP proxy: POST, GET (the SSE stream) and DELETE, both protocol eras.

Per POST: parse the body once, open one span per JSON-RPC message, ask the enforce hook about
tool calls, add `traceparent` to `params._meta` where absent, forward, relay the answer as it
arrives, and close the spans after the agent has its bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson

from tracecard.server.asgi import (
    Receive,
    Scope,
    Send,
    read_body,
)
from tracecard.server.proxy.calls import (
    Calls,
    close_notifications,
    end_unparsable,
    fail_open,
    finish_oversize,
    record_agent_replies,
    record_message,
    traceparent_value,
)
from tracecard.server.proxy.enforce import Started, answer_enforced, enforce_decisions
from tracecard.server.proxy.errors import ProxyError
from tracecard.server.proxy.forward import (
    RequestHeaders,
    scan_request_headers,
    stream_headers,
    upstream_url,
)
from tracecard.server.proxy.mcp_failures import answer_failure, answer_unanswered
from tracecard.server.proxy.relay import (
    TIMEOUT_ERRORS,
    Decoder,
    decoder_for,
    fetch,
    relay_sse,
    send_whole,
)
from tracecard.server.proxy.sessions import choose_run, names_a_run, unnamed_run
from tracecard.server.proxy.state import ProxyState, Upstream
from tracecard.server.proxy.transport import Answer
from tracecard.server.proxy.visibility import filter_body, filtering_sse, hidden_for
from tracecard.server.recording.recorder import Exchange, parse_json
from tracecard.server.runs.registry import RunInfo
from tracecard.traces import semconv

CANCELLED = "cancelled"  # error.type of a call whose request was cancelled (shutdown past grace)


async def handle_mcp(
    state: ProxyState,
    scope: Scope,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    path_run: str | None,
) -> None:
    """Serve one request to `/mcp/{upstream}` or `/runs/{id}/mcp/{upstream}`."""
    headers = scan_request_headers(scope["headers"], state.runtime.verifier_key)
    method = scope["method"]
    if method == "POST":
        limit = state.runtime.settings.max_body_bytes
        body = await read_body(receive, limit, headers.content_length)
        await _post(state, scope, receive, send, upstream, headers, body, path_run)
        return
    run = await choose_run(state, scope, upstream, headers, path_run, None)
    body = (
        b""
        if method in ("GET", "DELETE", "HEAD")
        else await read_body(receive, state.runtime.settings.max_body_bytes, headers.content_length)
    )
    await _other(state, scope, receive, send, upstream, headers, run, method, body)


def _exchange(run: RunInfo, upstream: Upstream, headers: RequestHeaders) -> Exchange:
    """Where this request's messages travel, for the recorder."""
    return Exchange(
        run=run,
        upstream=upstream.name,
        server_address=upstream.host,
        server_port=upstream.port,
        session_id=headers.session_id,
        protocol_version=headers.protocol_version,
        role=headers.role,
        role_header=headers.role_header,
        headers=headers.trace_headers,
    )


def _messages(parsed: Any) -> list[dict[str, Any]]:
    if isinstance(parsed, dict):
        return [parsed]
    if isinstance(parsed, list):
        return [m for m in parsed if isinstance(m, dict)]
    return []


async def _post(
    state: ProxyState,
    scope: Scope,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    headers: RequestHeaders,
    body: bytes,
    path_run: str | None,
) -> None:
    start_ns = time.time_ns()
    parsed, parse_error = parse_json(body)
    messages = _messages(parsed)
    first = messages[0] if len(messages) == 1 else None
    if names_a_run(headers, path_run):
        run = await choose_run(state, scope, upstream, headers, path_run, first)
    else:  # (no coroutine for the usual request)
        run = unnamed_run(state, scope, upstream, headers, first)
    exchange = _exchange(run, upstream, headers)
    calls = Calls(exchange)
    if not messages:
        reason = parse_error or "not a JSON-RPC message or batch"
        calls.unparsable = state.recorder.unparsable(body, reason, exchange, "mcp.unparsable")
    else:
        started = _start_spans(state, calls, messages, start_ns)
        decisions = enforce_decisions(state, calls, started, headers)
        if decisions is not None:
            batch = isinstance(parsed, list)
            await answer_enforced(state, calls, send, started, headers, batch, decisions)
            return
        environment = state.runtime.hooks.environment  # replay: answered from a recording
        if (
            environment is not None
            and environment.controls(run.id)
            and await environment.mcp_post(
                state, calls, send, started, headers, isinstance(parsed, list)
            )
        ):
            return
        if state.runtime.settings.recording.inject_traceparent and _inject(calls, started):
            with contextlib.suppress(orjson.JSONEncodeError):  # too deep to re-encode: as sent
                body = orjson.dumps(parsed)
    try:
        await _forward_post(state, scope, receive, send, upstream, headers, calls, body)
    except asyncio.CancelledError:  # the server stopped waiting: the spans end all the same
        fail_open(state, calls, CANCELLED, "tracecard stopped before the upstream answered")
        end_unparsable(calls, 499)
        raise


def _start_spans(
    state: ProxyState, calls: Calls, messages: list[dict[str, Any]], start_ns: int
) -> Started:
    """Open one span per request or notification; remember the agent's replies."""
    recorder = state.recorder
    started = []
    for message in messages:
        if "method" not in message:
            calls.replies.append(message)
            continue
        pending = recorder.start(message, calls.exchange, start_ns)
        if pending.method == "tools/call":
            params = message.get("params")
            tool = params.get("name") if isinstance(params, dict) else None
            annotations = state.tool_annotations(calls.exchange.upstream, str(tool))
            if annotations is not None:
                recorder.annotate(pending, annotations)
        if pending.request_id is None:
            calls.notifications.append(pending)
        else:
            calls.requests[str(pending.request_id)] = pending
        started.append((message, pending))
    return started


def _inject(calls: Calls, started: Started) -> bool:
    """Add our span's `traceparent` to `params._meta` where absent (the only payload change)."""
    changed = False
    for message, pending in started:
        params = message.get("params")
        if not isinstance(params, dict):
            continue
        meta = params.get("_meta")
        if meta is None:
            meta = params["_meta"] = {}
        if isinstance(meta, dict) and "traceparent" not in meta:
            meta["traceparent"] = traceparent_value(pending.span)
            changed = True
    return changed


def _forward(upstream: Upstream, headers: RequestHeaders) -> list[tuple[str, str]]:
    """The headers that go on: the agent's, and the upstream's configured ones."""
    if upstream.extra_headers:
        return headers.forward + upstream.extra_headers
    return headers.forward


async def _forward_post(
    state: ProxyState,
    scope: Scope,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    headers: RequestHeaders,
    calls: Calls,
    body: bytes,
) -> None:
    deadline = asyncio.get_running_loop().time() + upstream.timeout_s
    hidden = hidden_for(upstream.settings, headers.role)
    lists = [key for key, p in calls.requests.items() if p.method == "tools/list"] if hidden else []
    if lists:  # the answer is rewritten: ask for it uncompressed
        headers.forward = [*_without_encoding(headers.forward), ("accept-encoding", "identity")]
    url = upstream_url(upstream, scope.get("query_string", b""))
    forward, cap = _forward(upstream, headers), state.recorder.redactor.cap
    fetched = await fetch(state.client, "POST", url, forward, body, send, deadline, cap)
    response = fetched.response
    if response is None or fetched.failure is not None:
        await answer_unanswered(state, calls, send, upstream, fetched.failure)
        return
    status = response.status_code
    session = response.headers.get("Mcp-Session-Id")
    if session and not headers.session_id:
        _bind_session(state, calls, upstream, headers, session)
    content_type = response.headers.get("Content-Type", "")
    is_sse = content_type.startswith("text/event-stream")
    if status < 300 and status != 202:
        state.answers_sse[upstream.name] = is_sse
    if is_sse:
        await _send_stream_head(send, response)
        close_notifications(state, calls)
        if lists:
            send = filtering_sse(send, lists, hidden)
        await relay_sse(state, calls, response, receive, send, deadline)
        record_agent_replies(state, calls)
        end_unparsable(calls, status)
        return
    relayed = fetched.relayed
    assert relayed is not None  # not an event stream: its body was read
    parsed: Any = None
    if relayed.whole and relayed.kept and calls.requests:
        decoder = decoder_for(response.headers.get("Content-Encoding"))
        parsed, reason = parse_json(relayed.kept if decoder is None else decoder.feed(relayed.kept))
        if reason is not None and status < 300 and (decoder is None or decoder.problem is None):
            relayed.error = semconv.ERR_PROTOCOL  # e.g. cut at a Content-Length set too short
    if relayed.error is not None and not relayed.head_sent:
        # nothing reached the agent: every request gets a JSON-RPC error, not a broken body
        text = f"tracecard: upstream {upstream.name!r} broke off its answer ({relayed.error})"
        await answer_failure(state, calls, send, relayed.error, upstream, 502, text=text)
        record_agent_replies(state, calls)
        return
    if relayed.whole:
        shown = filter_body(relayed.kept, lists, hidden) if lists else None
        shown = relayed.kept if shown is None else shown
        await send_whole(send, status, response.raw_headers, shown)
    # --- the agent has its answer; everything below is recording only ---
    if calls.replies:
        record_agent_replies(state, calls)
    if calls.unparsable is not None:
        end_unparsable(calls, status)
    if relayed.error is not None:
        fail_open(state, calls, relayed.error, f"upstream {upstream.name!r} broke off the response")
        return
    if parsed is not None:
        for message in parsed if isinstance(parsed, list) else [parsed]:
            record_message(state, calls, message)
    elif not relayed.whole and calls.requests:
        decoder = Decoder(response.headers.get("Content-Encoding", ""))
        finish_oversize(state, calls, decoder.feed(relayed.kept), relayed.size)
    if status >= 400:
        fail_open(state, calls, str(status), f"upstream answered HTTP {status}")
    elif calls.requests:
        fail_open(state, calls, semconv.ERR_PROTOCOL, f"HTTP {status} without a JSON-RPC response")
    if calls.notifications:
        close_notifications(state, calls)


def _without_encoding(forward: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in forward if name.lower() != "accept-encoding"]


async def _send_stream_head(send: Send, response: Answer) -> None:
    """The head of a streamed answer; no Content-Length, tracecard may add events of its own."""
    headers = stream_headers(response.raw_headers)
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})


def _bind_session(
    state: ProxyState, calls: Calls, upstream: Upstream, headers: RequestHeaders, session: str
) -> None:
    """A new MCP session: its later requests join this request's run; spans get the id.

    The session is the one its `initialize` answer names (a server may send the header on a
    `server/discover` probe before it): that run wins over an earlier binding."""
    calls.exchange.session_id = session
    pending_all = [*calls.requests.values(), *calls.notifications]
    for pending in pending_all:
        pending.span.set_attribute(semconv.MCP_SESSION_ID, session)
    key = (upstream.name, session)
    run = calls.exchange.run
    if any(pending.method == "initialize" for pending in pending_all):
        bound = state.session_runs.get(key)
        if bound is not None and bound is not run:
            state.session_runs.pop(key)  # (its run ends, unless it is a named one)
    state.session_runs.bind(key, run)


async def _other(
    state: ProxyState,
    scope: Scope,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    headers: RequestHeaders,
    run: RunInfo,
    method: str,
    body: bytes,
) -> None:
    """GET (the server's SSE stream), DELETE (end of session) and anything else, unchanged."""
    environment = state.runtime.hooks.environment
    if environment is not None and await environment.mcp_other(run.id, upstream.name, method, send):
        return
    url = upstream_url(upstream, scope.get("query_string", b""))
    deadline = asyncio.get_running_loop().time() + upstream.timeout_s  # an SSE stream: its head
    fetched = await fetch(
        state.client, method, url, _forward(upstream, headers), body, send, deadline, 0
    )
    response = fetched.response
    if response is None or fetched.failure is not None:
        if isinstance(fetched.failure, TIMEOUT_ERRORS):
            text = f"upstream {upstream.name!r} did not answer within {upstream.timeout_s}s"
            raise ProxyError(504, text) from fetched.failure
        failure = fetched.failure
        raise ProxyError(
            502, f"upstream {upstream.name!r} is unavailable ({type(failure).__name__}: {failure})"
        ) from failure
    relayed = fetched.relayed
    if relayed is None:  # the server's SSE stream
        await _send_stream_head(send, response)
        exchange = _exchange(run, upstream, headers)
        await relay_sse(state, Calls(exchange), response, receive, send, None)
        return
    if relayed.error is not None and not relayed.head_sent:
        raise ProxyError(502, f"upstream {upstream.name!r} broke off its answer ({relayed.error})")
    if relayed.whole:
        await send_whole(send, response.status_code, response.raw_headers, relayed.kept)
    if method == "DELETE" and response.status_code < 300 and headers.session_id:
        if state.runtime.adhoc is not None:
            state.runtime.adhoc.end_soon(run, "deleted")  # a named run is not ended by this
        state.session_runs.pop((upstream.name, headers.session_id))  # and its ad-hoc run entry
