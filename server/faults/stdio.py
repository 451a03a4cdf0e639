"""Faults on stdio upstreams: a wrapper around the run's process (or its replay stand-in).

`http_status` has no HTTP to speak of between tracecard and a child process: on a stdio
upstream it is a JSON-RPC error -32000 naming the status ("HTTP 503 (injected)").
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.trace import INVALID_SPAN, Span

from tracecard.server.faults.inject import changed_reply, replacement
from tracecard.server.faults.mcp import choose, mark, target_of
from tracecard.server.faults.plan import RunFaults
from tracecard.server.faults.standin import StdioCall, StdioStandIn
from tracecard.server.proxy import tool_annotations
from tracecard.server.recording.recorder import PendingCall, Recorder
from tracecard.traces import semconv


class FaultedProcess(StdioStandIn):
    """Passes everything to `process`, except the agent's calls a fault rule fires on."""

    def __init__(
        self, process: Any, faults: RunFaults, upstream: str, recorder: Recorder, annotations: Any
    ) -> None:
        super().__init__(upstream, recorder)
        self.process = process
        self.faults = faults
        self.annotations = annotations

    def __getattr__(self, name: str) -> Any:
        return getattr(self.process, name)

    async def answer(self, call: StdioCall) -> dict[str, Any]:
        message, exchange, pending = call.message, call.exchange, call.pending
        tool = target_of(message)
        rule = None
        if exchange.role == semconv.ROLE_AGENT:
            rule = choose(self.faults, self.upstream, pending, tool)
        if rule is None:
            return await call.to(self.process)
        mark(self.faults, pending, rule, tool)
        if rule.kind == "latency_ms":
            await asyncio.sleep(rule.ms / 1000)
            return await call.to(self.process)
        if rule.ms:
            await asyncio.sleep(rule.ms / 1000)
        request_id = message.get("id")
        if rule.kind == "http_status":
            text = f"HTTP {rule.status} (injected): {rule.message}"
            self.recorder.fail(pending, str(rule.status), text)
            error = {"code": -32000, "message": text, "data": {"status": rule.status}}
            return {"jsonrpc": "2.0", "id": request_id, "error": error}
        reply = replacement(rule, request_id, self.upstream)
        if reply is not None:
            if rule.kind == "timeout":
                self.recorder.fail(pending, semconv.ERR_TIMEOUT, reply["error"]["message"])
            else:
                self.recorder.finish(pending, reply)
            return reply
        # the real answer, recorded on a span of its own that goes nowhere, then changed
        shadow = PendingCall(span=_nowhere(), method=pending.method, request_id=request_id)
        real = await call.to(self.process, shadow)
        changed = changed_reply(rule, real, lambda name: self.faults.tool_matches(rule, name))
        if pending.method == "tools/list":
            tool_annotations.remember(self.annotations, self.upstream, changed.get("result"))
        self.recorder.finish(pending, changed)
        return changed


def _nowhere() -> Span:
    return INVALID_SPAN
