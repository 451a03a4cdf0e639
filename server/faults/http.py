"""Faults on plain HTTP tools: a replacing answer, a delay, or a change to the real body.

`jsonrpc_error` and `tool_error` have no JSON-RPC here: a plain HTTP call gets HTTP 500 with
`{"error": message}`; `drop_tool` and `schema_change` never fire on plain HTTP.
"""

from __future__ import annotations

import asyncio
import functools

import orjson

from tracecard.server.faults.inject import changed_body
from tracecard.server.faults.plan import RunFaults
from tracecard.server.replay.http import HttpAnswer
from tracecard.traces import semconv


async def fault_http(faults: RunFaults, upstream: str, role: str, tool: str) -> HttpAnswer | None:
    """What a fault rule does to one plain HTTP call (`tool` is `METHOD /path`), if one fires."""
    if role != semconv.ROLE_AGENT:
        return None
    rule = faults.check(upstream, tool)
    if rule is None:
        return None
    attributes = {semconv.FAULT_KIND: rule.kind, semconv.FAULT_RULE: rule.id}
    faults.injected.append({"rule": rule.id, "kind": rule.kind, "tool": tool, "span_id": None})
    if rule.ms:
        await asyncio.sleep(rule.ms / 1000)
    if rule.kind == "latency_ms":
        return HttpAnswer(attributes)
    if rule.kind in ("truncate", "corrupt"):
        return HttpAnswer(attributes, transform=functools.partial(changed_body, rule))
    if rule.kind == "timeout":
        text = f"upstream {upstream!r} did not answer in time (injected fault)"
        return HttpAnswer(attributes, 504, error=text, error_type=semconv.ERR_TIMEOUT)
    status = rule.status if rule.kind == "http_status" else 500
    headers = [("content-type", "application/json")]
    if rule.kind == "http_status" and rule.retry_after is not None:
        headers.append(("retry-after", str(rule.retry_after)))
    body = orjson.dumps({"error": rule.message, "status": status})
    return HttpAnswer(attributes, status, headers, body)
