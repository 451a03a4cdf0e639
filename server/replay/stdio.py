"""Replay on stdio upstreams: a stand-in for the server process, so none is started.

The bridge asks `StdioCalls.process` for the run's process; under replay it gets a
`ReplayedProcess`, which answers the handshake and every request from the recording. A request
with no recorded answer is a JSON-RPC error, or (`on_miss = "live"`) goes to a real process,
started then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracecard.server.faults.standin import StdioCall, StdioStandIn
from tracecard.server.recording.recorder import Exchange, Recorder
from tracecard.server.replay.index import Miss, RunReplay, UpstreamIndex
from tracecard.server.replay.mcp import answer_miss, live_key, mark_recorded, recorded_reply
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.stdio.pool import StdioUpstreams

_DISCOVER_INFO = "io.modelcontextprotocol/serverInfo"


class ReplayedProcess(StdioStandIn):
    """Quacks like `StdioProcess` for the bridge: `initialize_result`, `call`, `notify`."""

    alive = True

    def __init__(
        self,
        name: str,
        replay: RunReplay,
        index: UpstreamIndex,
        recorder: Recorder,
        pool: StdioUpstreams,
        capabilities: dict[str, Any],
    ) -> None:
        super().__init__(name, recorder)
        self.replay = replay
        self.index = index
        self.pool = pool
        self.client_capabilities = capabilities
        self.initialize_result = _handshake(index)

    async def answer(self, call: StdioCall) -> dict[str, Any]:
        message, exchange, pending = call.message, call.exchange, call.pending
        key = live_key(
            self.recorder, self.upstream, exchange.role, message, self.index.policy.ignore
        )
        found = self.index.take(key)
        if not isinstance(found, Miss):
            reply = recorded_reply(found, message.get("id"))
            mark_recorded(pending, found)
            self.replay.served += 1
            self.recorder.finish(pending, reply)
            return reply
        if self.index.policy.on_miss != "live":
            return answer_miss(self.recorder, self.replay, pending, found)
        self.replay.note_miss(found, format(pending.span.get_span_context().span_id, "016x"))
        self.replay.live += 1
        pending.span.set_attribute(semconv.REPLAY, semconv.REPLAY_LIVE)
        process = await self.pool.process_for(self.upstream, exchange)
        return await call.to(process)

    async def notify(self, message: dict[str, Any], exchange: Exchange) -> None:
        pending = self.recorder.start(message, exchange)
        pending.span.set_attribute(semconv.REPLAY, semconv.REPLAY_RECORDED)
        self.recorder.finish(pending, None)

    async def answer_server(self, response: dict[str, Any]) -> bool:
        return False  # a replayed server sends no requests of its own


def _handshake(index: UpstreamIndex) -> dict[str, Any]:
    """The recorded `initialize` result (else one made from a recorded `server/discover`)."""
    discovered: dict[str, Any] | None = None
    for entry in index.recorded:
        result = (entry.message or {}).get("result")
        if not isinstance(result, dict):
            continue
        if entry.key.method == "initialize":
            return result
        if entry.key.method == "server/discover" and discovered is None:
            discovered = result
    if discovered is None:
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}}
    meta = discovered.get("_meta") if isinstance(discovered.get("_meta"), dict) else {}
    found: dict[str, Any] = {
        "protocolVersion": "2025-11-25",
        "capabilities": discovered.get("capabilities") or {},
        "serverInfo": (meta or {}).get(_DISCOVER_INFO) or {},
    }
    if discovered.get("instructions"):
        found["instructions"] = discovered["instructions"]
    return found
