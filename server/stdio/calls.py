"""The stdio bridge's calls: each JSON-RPC request recorded, checked and sent to its process.

Agent traffic goes through the same checks as on the HTTP proxy, from the same code: a call of a
verifier-only tool is refused (server/proxy/visibility.py), and a call a `block = true` safety
rule forbids is answered with the proxy's JSON-RPC error (-32001) and never reaches the process
(server/proxy/enforce.py), shared or `per_run` alike. The tools' annotations come from the
upstream's own `tools/list` answers, as on the proxy, for the spans and the enforce hook.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from tracecard.server.asgi import CODE_UPSTREAM, jsonrpc_error
from tracecard.server.proxy import enforce, tool_annotations, visibility
from tracecard.server.recording.recorder import Exchange, PendingCall, Recorder, is_verifier
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runtime import Runtime
from tracecard.server.stdio.messages import UpstreamError
from tracecard.server.stdio.pool import StdioUpstreams
from tracecard.server.stdio.process import StdioProcess
from tracecard.traces import semconv


class StdioCalls:
    """Records and forwards the requests of every stdio upstream's clients."""

    def __init__(self, runtime: Runtime, recorder: Recorder, pool: StdioUpstreams) -> None:
        self.runtime = runtime
        self.recorder = recorder
        self.pool = pool
        self.annotations: tool_annotations.Annotations = {}

    def exchange(
        self,
        upstream: str,
        run: RunInfo,
        headers: dict[str, str],
        session_id: str | None = None,
        version: str | None = None,
    ) -> Exchange:
        """Where a request travels; verifier only with the database's verifier key."""
        verifier = is_verifier(headers.get("tracecard-verifier"), self.runtime.verifier_key)
        role_header = headers.get("tracecard-role")
        return Exchange(
            run=run,
            upstream=upstream,
            transport="pipe",
            session_id=session_id,
            protocol_version=version,
            role=semconv.ROLE_VERIFIER if verifier else semconv.ROLE_AGENT,
            role_header=role_header[:64] if role_header is not None else None,
            headers=headers,
        )

    async def process(self, upstream: str, exchange: Exchange) -> StdioProcess:
        environment = self.runtime.hooks.environment  # replay: a stand-in, no process started
        if environment is not None:
            stand_in = await environment.stdio_process(upstream, exchange, self.recorder, self.pool)
            if stand_in is not None:
                return cast(StdioProcess, stand_in)
        return await self.pool.process_for(upstream, exchange)

    def _start(
        self, message: dict[str, Any], exchange: Exchange, found: dict[str, Any] | None
    ) -> PendingCall:
        """A request's span; a tools/call names its tool's annotations (`found`), as on the
        proxy."""
        pending = self.recorder.start(message, exchange)
        if found is not None:
            self.recorder.annotate(pending, found)
        return pending

    async def forward(
        self,
        upstream: str,
        message: dict[str, Any],
        exchange: Exchange,
        sink: Any = None,
        started: Callable[[StdioProcess, PendingCall], None] | None = None,
    ) -> dict[str, Any]:
        """Forward a request, failures as JSON-RPC errors; verifier-only tools stay hidden,
        calls a blocking rule forbids are answered here. `started` is told the process and
        the call's span once it is forwarded (server/mrtr/bridge.py keeps the call open)."""
        hidden = visibility.hidden_for(self.runtime.settings.upstreams.get(upstream), exchange.role)
        if (refusal := visibility.refusal(self.recorder, message, exchange, hidden)) is not None:
            return refusal
        found = tool_annotations.of_call(self.annotations, upstream, message)
        decision = enforce.decide(self.runtime, exchange.run, upstream, message, found)
        if decision is not None:  # before any process starts: nothing reaches the tool
            pending = self._start(message, exchange, found)
            return enforce.block_call(self.recorder, pending, decision)
        try:
            process = await self.process(upstream, exchange)
        except UpstreamError as exc:
            pending = self._start(message, exchange, found)
            self.recorder.fail(pending, exc.error_type, str(exc))
            return jsonrpc_error(message.get("id"), CODE_UPSTREAM, str(exc))
        pending = self._start(message, exchange, found)
        visibility.mark_list(pending, hidden)
        if started is not None:
            started(process, pending)
        try:
            reply = await process.call(
                message, exchange, self.pool.timeout(upstream), sink, pending
            )
        except UpstreamError as exc:
            if exc.error_type == semconv.ERR_TIMEOUT:
                asyncio.get_running_loop().create_task(
                    self.pool.recycle(upstream, exchange.run, process)
                )
            return jsonrpc_error(message.get("id"), CODE_UPSTREAM, str(exc))
        if pending.method == "tools/list":
            tool_annotations.remember(self.annotations, upstream, reply.get("result"))
        return visibility.shown(reply, pending, hidden)

    async def answer_self(
        self, message: dict[str, Any], exchange: Exchange, result: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Record a message tracecard answers itself (handshakes); return the reply."""
        pending = self.recorder.start(message, exchange)
        reply = (
            None if result is None else {"jsonrpc": "2.0", "id": message["id"], "result": result}
        )
        self.recorder.finish(pending, reply)
        return reply
