"""The trial environment on the hot path: which runs replay, which get faults.

One object on `runtime.hooks.environment`; the proxy, the plain HTTP proxy and the stdio bridge
each ask it one question per request, answered from memory (replay indexes and fault states are
made at experiment creation). A run's entries are dropped when the run finishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracecard.server.asgi import Send
from tracecard.server.faults.http import fault_http
from tracecard.server.faults.llm import fault_llm
from tracecard.server.faults.mcp import fault_post
from tracecard.server.faults.plan import RunFaults
from tracecard.server.faults.stdio import FaultedProcess
from tracecard.server.recording.recorder import Exchange, Recorder
from tracecard.server.replay.http import HttpAnswer, replay_http
from tracecard.server.replay.index import RunReplay
from tracecard.server.replay.mcp import replay_other, replay_post
from tracecard.server.replay.model import replay_model
from tracecard.server.replay.model_store import answer_attributes
from tracecard.server.replay.stdio import ReplayedProcess

if TYPE_CHECKING:
    from tracecard.server.proxy.calls import Calls
    from tracecard.server.proxy.forward import RequestHeaders
    from tracecard.server.proxy.state import ProxyState
    from tracecard.server.recording.genai import ModelExchange
    from tracecard.server.stdio.pool import StdioUpstreams


class TrialEnvironment:
    """Replay indexes and fault states by run id, consulted by the proxy and the stdio bridge."""

    def __init__(self) -> None:
        self.replays: dict[str, RunReplay] = {}
        self.faults: dict[str, RunFaults] = {}
        self.annotations: dict[str, dict[str, dict[str, Any]]] = {}  # faulted stdio listings

    def add(self, replays: dict[str, RunReplay]) -> None:
        self.replays.update(replays)

    def add_faults(self, faults: dict[str, RunFaults]) -> None:
        self.faults.update(faults)

    def finished(self, run_id: str) -> tuple[RunReplay | None, RunFaults | None]:
        return self.replays.pop(run_id, None), self.faults.pop(run_id, None)

    def controls(self, run_id: str) -> bool:
        """Whether a replay or a fault plan applies to the run (else `mcp_post` forwards)."""
        return run_id in self.replays or run_id in self.faults

    async def mcp_post(
        self,
        state: ProxyState,
        calls: Calls,
        send: Send,
        started: list[tuple[dict[str, Any], Any]],
        headers: RequestHeaders,
        batch: bool,
    ) -> bool:
        """True when the POST was answered here (replayed, faulted); False: forward it."""
        run_id = calls.exchange.run.id
        replay = self.replays.get(run_id)
        replayed = replay is not None and calls.exchange.upstream in replay.upstreams
        faults = self.faults.get(run_id)
        change = None
        if faults is not None:  # a fault plan over a replay changes the recorded answers
            faulted = await fault_post(faults, state, calls, send, started, headers, replayed)
            if faulted is True:
                return True
            change = faulted or None
        if replay is None:
            return False
        return await replay_post(replay, state, calls, send, started, headers, batch, change)

    async def mcp_other(self, run_id: str, upstream: str, method: str, send: Send) -> bool:
        """GET or DELETE of an MCP upstream this run replays: answered here (True)."""
        replay = self.replays.get(run_id)
        if replay is None or upstream not in replay.upstreams:
            return False
        await replay_other(send, method)
        return True

    async def http(
        self,
        run_id: str,
        recorder: Recorder,
        upstream: str,
        role: str,
        request: tuple[str, str, str, bytes],  # method, path, query, body
    ) -> HttpAnswer | None:
        """The plain HTTP call's fault or recorded answer (or miss); None: forward it as usual."""
        method, path, query, body = request
        faults = self.faults.get(run_id)
        replay = self.replays.get(run_id)
        faulted = None
        if faults is not None:
            faulted = await fault_http(faults, upstream, role, f"{method.upper()} /{path}")
            if faulted is not None and (faulted.status or replay is None):
                return faulted  # a replacing fault (or nothing replayed): the fault's answer
        if replay is None:
            return None
        answer = replay_http(replay, recorder, upstream, role, method, path, query, body)
        if faulted is None or answer is None:
            return answer or faulted
        # a delay or a change over a replayed answer: the recorded answer, changed
        answer.attributes.update(faulted.attributes)
        if faulted.transform is not None and answer.status and answer.error is None:
            answer.body = faulted.transform(answer.body)
        elif faulted.transform is not None and not answer.status:
            answer.transform = faulted.transform  # on_miss = "live": the live body, changed
        return answer

    async def llm(self, recorder: Recorder, exchange: ModelExchange, send: Send) -> bool:
        """A model request answered here (True: a fault's answer, or the recorded one when the
        run replays its model), else forwarded; a fault's delay comes first either way."""
        faults = self.faults.get(exchange.run.id)
        if faults is not None and await fault_llm(faults, recorder, exchange, send):
            return True
        replay = self.replays.get(exchange.run.id)
        if replay is None:
            return False
        return await replay_model(replay, recorder, exchange, send)

    def model_answer(self, recorder: Recorder, exchange: ModelExchange) -> dict[str, Any]:
        """What a later replay needs of this live model answer (attributes for its span)."""
        return answer_attributes(recorder, exchange)

    async def stdio_process(
        self, upstream: str, exchange: Exchange, recorder: Recorder, pool: StdioUpstreams
    ) -> Any:
        """A stand-in for the run's stdio process (None: start the real one): its replay, or
        the real process behind the run's fault rules."""
        run_id = exchange.run.id
        replay = self.replays.get(run_id)
        index = replay.upstreams.get(upstream) if replay is not None else None
        process: Any = None
        if replay is not None and index is not None:
            capabilities = pool.slot(upstream, exchange.run).client_capabilities
            process = ReplayedProcess(upstream, replay, index, recorder, pool, capabilities)
        faults = self.faults.get(run_id)
        if faults is None:
            return process
        if process is None:
            process = await pool.process_for(upstream, exchange)
        return FaultedProcess(process, faults, upstream, recorder, self.annotations)
