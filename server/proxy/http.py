"""Plain HTTP tools at `/http/{upstream}/{path}`: any method, one span per request."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from tracecard.server.asgi import Receive, Scope, Send, read_body
from tracecard.server.proxy.enforce import blocked_text, decide_call
from tracecard.server.proxy.errors import ProxyError
from tracecard.server.proxy.forward import (
    RequestHeaders,
    raw_rest,
    scan_request_headers,
    upstream_url,
)
from tracecard.server.proxy.relay import TIMEOUT_ERRORS, Decoder, fetch, send_whole
from tracecard.server.proxy.sessions import choose_run
from tracecard.server.proxy.state import ProxyState, Upstream
from tracecard.server.recording.recorder import parse_json, traceparent_of
from tracecard.server.recording.redaction import Redactor
from tracecard.server.runs.registry import RunInfo
from tracecard.traces import semconv


async def handle_http(
    state: ProxyState,
    scope: Scope,
    receive: Receive,
    send: Send,
    upstream: Upstream,
    path_run: str | None,
    path: str,
) -> None:
    """Forward one request to the plain HTTP upstream and record it as one span."""
    path = raw_rest(scope, path)  # as sent, below the base path; 400 for what cannot be sent
    headers = scan_request_headers(scope["headers"], state.runtime.verifier_key)
    run = await choose_run(state, scope, upstream, headers, path_run, None)
    body = await read_body(receive, state.runtime.settings.max_body_bytes, headers.content_length)
    start_ns = time.time_ns()
    method = scope["method"]
    raw_query: bytes = scope.get("query_string", b"")
    query = raw_query.decode("latin-1")
    url = upstream_url(upstream, raw_query, path)
    forward = headers.forward + upstream.extra_headers
    cap = state.recorder.redactor.cap
    deadline = asyncio.get_running_loop().time() + upstream.timeout_s  # head and body alike
    record = (state, run, upstream, headers, method, path, query, body, start_ns)
    decision = _decide(state, run, upstream, method, path, body)
    if decision is not None:  # enforce mode: the upstream never sees the request
        text = blocked_text(decision)
        _record(*record, error=semconv.ERR_BLOCKED, blocked=(str(decision.rule_id), text))
        raise ProxyError(403, text, rule=decision.rule_id)
    extra: dict[str, Any] = {}
    answer = None
    environment = state.runtime.hooks.environment  # replay or faults: an answer of their own
    if environment is not None:
        request = (method, path, query, body)
        answer = await environment.http(
            run.id, state.recorder, upstream.name, headers.role, request
        )
        if answer is not None and answer.status:
            await _replayed(send, functools.partial(_record, *record), answer)
            return
        extra = answer.attributes if answer is not None else extra
    fetched = await fetch(state.client, method, url, forward, body, send, deadline, cap + 1, False)
    response, relayed = fetched.response, fetched.relayed
    if response is None or relayed is None:
        exc = fetched.failure
        timed_out = isinstance(exc, TIMEOUT_ERRORS)
        error = semconv.ERR_TIMEOUT if timed_out else semconv.ERR_UNAVAILABLE
        _record(*record, error=error, extra=extra)
        if timed_out:
            text = f"upstream {upstream.name!r} did not answer within {upstream.timeout_s}s"
            raise ProxyError(504, text) from None
        text = f"upstream {upstream.name!r} is unavailable ({type(exc).__name__}: {exc})"
        raise ProxyError(502, text) from None
    if relayed.whole and answer is not None and answer.transform is not None:
        relayed.kept = answer.transform(relayed.kept)  # a fault plan's truncate / corrupt
    if relayed.whole:
        await send_whole(send, response.status_code, response.raw_headers, relayed.kept)
    answered = (response.status_code, response.items())
    _record(*record, answered, relayed.kept, relayed.size, error=relayed.error, extra=extra)
    if relayed.error is not None and not relayed.head_sent:
        status = 504 if relayed.error == semconv.ERR_TIMEOUT else 502
        text = f"upstream {upstream.name!r} broke off its answer ({relayed.error})"
        raise ProxyError(status, text)


async def _replayed(send: Send, record: Callable[..., None], answer: Any) -> None:
    """Send a recorded answer and record its span; a miss is the proxy's error (599)."""
    if answer.error is not None:
        record(error=answer.error_type, extra=answer.attributes)
        raise ProxyError(answer.status, answer.error, reason=answer.error_type)
    raw = tuple((n.encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers)
    await send_whole(send, answer.status, raw, answer.body)
    record((answer.status, answer.headers), answer.body, len(answer.body), extra=answer.attributes)


def _decide(
    state: ProxyState, run: RunInfo, upstream: Upstream, method: str, path: str, body: bytes
) -> Any:
    """Enforce mode on a plain HTTP call: named and read as the scorers read it (`METHOD /path`,
    the JSON body's object, or `{"body": value}`), on the body as sent (before redaction)."""
    if state.runtime.hooks.enforce is None:
        return None
    tool = _tool(method, path)
    return decide_call(state.runtime, run, upstream.name, tool, _arguments(body), None)


def _tool(method: str, path: str) -> str:
    """A plain HTTP call's name, as the scorers give it (scorers/calls.py)."""
    return f"{method.upper()} /{path}"


def _arguments(body: bytes) -> dict[str, Any] | None:
    """A plain HTTP call's arguments as the scorers read them: the JSON body's object, another
    JSON value as `{"body": value}`, `{}` for no body, None for a body that is not JSON."""
    if not body:
        return {}
    parsed, problem = parse_json(body)
    if problem is not None:
        return None
    return parsed if isinstance(parsed, dict) else {"body": parsed}


def _payload(
    redactor: Redactor, raw: bytes, size: int, encoding: str = "", form: bool = False
) -> tuple[str, bool]:
    """A body for the span: redacted JSON when it is JSON, else text, cut at the cap."""
    decoder = Decoder(encoding)
    raw = decoder.feed(raw)
    if size <= redactor.cap:
        parsed, problem = parse_json(raw)
        if problem is None:
            return redactor.text(parsed)
        if form:  # a form body: secret fields are fingerprinted like JSON keys
            raw = redactor.query(raw.decode("utf-8", errors="replace")).encode()
    text, truncated = redactor.cut(raw)
    if size > len(raw) and not truncated:
        text, truncated = f"{text}…[truncated by tracecard: original size {size} bytes]", True
    return text, truncated


def _record(
    state: ProxyState,
    run: RunInfo,
    upstream: Upstream,
    headers: RequestHeaders,
    method: str,
    path: str,
    query: str,
    body: bytes,
    start_ns: int,
    response: tuple[int, list[tuple[str, str]]] | None = None,  # the answer's status, headers
    received: bytes = b"",
    size: int = 0,
    error: str | None = None,
    blocked: tuple[str, str] | None = None,  # (rule, message): enforce mode refused the call
    extra: dict[str, Any] | None = None,  # replay's attributes (tracecard.replay...)
) -> None:
    redactor = state.recorder.redactor_for(upstream.name)
    attributes: dict[str, Any] = {
        semconv.RUN_ID: run.id,
        semconv.UPSTREAM: upstream.name,
        semconv.ROLE: headers.role,
        **({semconv.ROLE_HEADER: headers.role_header} if headers.role_header else {}),
        semconv.NETWORK_TRANSPORT: "tcp",
        semconv.HTTP_REQUEST_METHOD: method,
        semconv.URL_PATH: f"/{path}",
        **redactor.header_items(headers.forward),
    }
    if query:
        attributes[semconv.URL_QUERY] = redactor.query(query)
    if upstream.host:
        attributes[semconv.SERVER_ADDRESS] = upstream.host
    if upstream.port:
        attributes[semconv.SERVER_PORT] = upstream.port
    truncated = False
    if body:
        form = any(
            n.lower() == "content-type" and v.startswith("application/x-www-form-urlencoded")
            for n, v in headers.forward
        )
        attributes[semconv.REQUEST_BODY], truncated = _payload(redactor, body, len(body), form=form)
        stored = str(attributes[semconv.REQUEST_BODY])
        tool = _tool(method, path)
        checked = state.recorder.safety_checked(run, tool, lambda: _arguments(body), stored)
        if checked is not None:
            attributes[semconv.SAFETY_CHECKED] = checked
    status = Status(StatusCode.UNSET)
    if response is not None:
        code, items = response
        attributes[semconv.HTTP_RESPONSE_STATUS_CODE] = code
        encoding = ""
        for name, value in items:
            lowered = name.lower()
            secret = lowered in redactor.headers or lowered == "set-cookie"
            attributes[f"http.response.header.{lowered}"] = "[REDACTED]" if secret else value
            if lowered == "content-encoding":
                encoding = value
        text, cut = _payload(redactor, received, size, encoding)
        attributes[semconv.RESPONSE_BODY] = text
        truncated = truncated or cut
        if code >= 400:
            attributes[semconv.ERROR_TYPE] = str(code)
            status = Status(StatusCode.ERROR, f"HTTP {code}")
    if error is not None:
        attributes[semconv.ERROR_TYPE] = error
        status = Status(StatusCode.ERROR, error)
    if blocked is not None:
        attributes[semconv.BLOCKED_RULE] = blocked[0]
        status = Status(StatusCode.ERROR, blocked[1])
    if truncated:
        attributes[semconv.TRUNCATED] = True
    if extra:
        attributes.update(extra)
    parent = traceparent_of({}, headers.trace_headers, run, attributes) or run.context
    span = state.recorder.tracer.start_span(
        f"{method} /{path}",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=start_ns,
    )
    span.set_status(status)
    span.end()
