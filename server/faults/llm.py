"""Faults on the model side (`/llm/{upstream}/...`): the same rules as tools, on model calls.

A model call is named as a plain HTTP call is, `METHOD /path` (`POST /chat/completions`,
`POST /v1/messages`), for a rule's `tool` glob. A rule reaches a model upstream only when its
`upstream` names it (an exact name, or a glob other than the default `*`), so a plan written for
tools keeps breaking tools only. Kinds that replace the answer give the agent the provider's own
error shape, so its SDK reads (and retries) them as a real outage: `timeout` (504), `jsonrpc_error`
and `tool_error` (500), `http_status` (its status with `Retry-After`); `latency_ms` delays the
real (or recorded) answer. Kinds that change an answer (`truncate`, `corrupt`) or a listing do
not apply to a model call (a plan check says so). Each fault is recorded on the call's span.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import orjson

from tracecard.server.asgi import Send
from tracecard.server.faults.plan import FaultRule, RunFaults
from tracecard.server.recording.genai import record_model_call
from tracecard.server.recording.recorder import Recorder
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.recording.genai import ModelExchange

# provider error types by status, as OpenAI and Anthropic name them
_OPENAI = {429: "rate_limit_exceeded", 504: "timeout"}
_ANTHROPIC = {429: "rate_limit_error", 529: "overloaded_error", 504: "timeout_error"}


def model_error(rule: FaultRule, provider: str, upstream: str) -> tuple[int, list[Any], bytes]:
    """The status, headers and body a replacing rule answers a model call with."""
    status = {"timeout": 504, "http_status": rule.status}.get(rule.kind, 500)
    message = rule.message
    if rule.kind == "timeout":
        message = f"upstream {upstream!r} did not answer in time (injected fault)"
    if provider == "anthropic":
        kind = _ANTHROPIC.get(status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = _OPENAI.get(status, "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    headers = [("content-type", "application/json")]
    if rule.kind == "http_status" and rule.retry_after is not None:
        headers.append(("retry-after", str(rule.retry_after)))
    return status, headers, orjson.dumps(body)


async def fault_llm(
    faults: RunFaults, recorder: Recorder, exchange: ModelExchange, send: Send
) -> bool:
    """True when a rule answered the call (its span recorded); False: send it on (a delay, if
    any, is over and is marked on the exchange for its span)."""
    if exchange.role != semconv.ROLE_AGENT:
        return False
    tool = f"{exchange.method.upper()} /{exchange.path}"
    rule = faults.check(exchange.upstream, tool, model=True)
    if rule is None:
        return False
    exchange.extra.update({semconv.FAULT_KIND: rule.kind, semconv.FAULT_RULE: rule.id})
    faults.injected.append({"rule": rule.id, "kind": rule.kind, "tool": tool, "span_id": None})
    if rule.ms:
        await asyncio.sleep(rule.ms / 1000)
    if rule.kind == "latency_ms":
        return False
    status, headers, body = model_error(rule, exchange.provider, exchange.upstream)
    raw = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
    exchange.status_code, exchange.response_headers = status, headers
    exchange.response_body, exchange.response_size = body, len(body)
    if rule.kind == "timeout":
        exchange.error = semconv.ERR_TIMEOUT
        exchange.error_text = f"upstream {exchange.upstream!r} did not answer in time (injected)"
    record_model_call(recorder, exchange, time.time_ns())
    return True
