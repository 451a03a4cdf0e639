"""The trial environment on the hot path: which runs replay (and, later, which get faults).

One object on `runtime.hooks.environment`; the proxy, the plain HTTP proxy and the stdio bridge
each ask it one question per request, answered from memory (indexes built at experiment
creation, `prepare`). A run's entry is dropped when the run finishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracecard.server.asgi import Send
from tracecard.server.recording.recorder import Exchange, Recorder
from tracecard.server.replay.http import HttpAnswer, replay_http
from tracecard.server.replay.index import RunReplay
from tracecard.server.replay.mcp import replay_other, replay_post
from tracecard.server.replay.stdio import ReplayedProcess

if TYPE_CHECKING:
    from tracecard.server.proxy.calls import Calls
    from tracecard.server.proxy.forward import RequestHeaders
    from tracecard.server.proxy.state import ProxyState
    from tracecard.server.stdio.pool import StdioUpstreams


class TrialEnvironment:
    """Replay indexes by run id, consulted by the proxy and the stdio bridge."""

    def __init__(self) -> None:
        self.replays: dict[str, RunReplay] = {}

    def add(self, replays: dict[str, RunReplay]) -> None:
        self.replays.update(replays)

    def finished(self, run_id: str) -> RunReplay | None:
        return self.replays.pop(run_id, None)

    async def mcp_post(
        self,
        state: ProxyState,
        calls: Calls,
        send: Send,
        started: list[tuple[dict[str, Any], Any]],
        headers: RequestHeaders,
        batch: bool,
    ) -> bool:
        """True when the POST was answered here (replayed); False: forward it."""
        replay = self.replays.get(calls.exchange.run.id)
        if replay is None:
            return False
        return await replay_post(replay, state, calls, send, started, headers, batch)

    async def mcp_other(self, run_id: str, upstream: str, method: str, send: Send) -> bool:
        """GET or DELETE of an MCP upstream this run replays: answered here (True)."""
        replay = self.replays.get(run_id)
        if replay is None or upstream not in replay.upstreams:
            return False
        await replay_other(send, method)
        return True

    def http(
        self,
        run_id: str,
        recorder: Recorder,
        upstream: str,
        role: str,
        request: tuple[str, str, str, bytes],  # method, path, query, body
    ) -> HttpAnswer | None:
        """The plain HTTP call's recorded answer (or miss); None: forward it as usual."""
        replay = self.replays.get(run_id)
        if replay is None:
            return None
        method, path, query, body = request
        return replay_http(replay, recorder, upstream, role, method, path, query, body)

    async def stdio_process(
        self, upstream: str, exchange: Exchange, recorder: Recorder, pool: StdioUpstreams
    ) -> Any:
        """A stand-in for the run's stdio process (None: start the real one)."""
        replay = self.replays.get(exchange.run.id)
        index = replay.upstreams.get(upstream) if replay is not None else None
        if replay is None or index is None:
            return None
        capabilities = pool.slot(upstream, exchange.run).client_capabilities
        return ReplayedProcess(upstream, replay, index, recorder, pool, capabilities)
