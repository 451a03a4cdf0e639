"""Multi round-trip requests on the stdio bridge: the bridge is the stateless server.

A stdio server speaks the session protocol to tracecard, so during a call it asks its client
with a server->client request (`elicitation/create`, `sampling/createMessage`, `roots/list`).
A stateless (2026-07-28) client has no stream to receive one: the bridge answers its HTTP
request with `input_required` instead, naming the server's questions (`inputRequests`) and a
`requestState` of its own, keeps the call open in the process, and when the client retries
with `inputResponses` hands each answer to the server and waits for the next question or the
final result. The client sees what a 2026-07-28 server would send (SEP-2322).

One call, recorded once: the forwarded request's span (`tools/call {tool}`) is the call, with
its final result and `tracecard.mrtr.rounds`; each HTTP request of it is a child
`round N · tools/call {tool}` with the questions and the answers (as server/mrtr/calls.py
records rounds that an HTTP upstream made). A retry whose `requestState` the bridge did not
issue (or that changes the tool or arguments) is refused with -32602, as the SDK's servers
refuse a state they cannot verify; `inputResponses` without a state are passed on with a fresh
call (a stateless server ignores what it did not ask for). Either is recorded as a call of its
own (`mrtr_unmatched`). The
call runs within the upstream's `timeout_s` in all, the client's think time included.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson

from tracecard.server.asgi import jsonrpc_error
from tracecard.server.mcp_versions import INVALID_PARAMS
from tracecard.server.mrtr.calls import CALL_ONLY, INPUT_REQUIRED, METHODS
from tracecard.server.recording.span import RecordedSpan
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.recording.recorder import Exchange, PendingCall, Recorder
    from tracecard.server.stdio.calls import StdioCalls
    from tracecard.server.stdio.process import StdioProcess

STATE_PREFIX: Final = "tracecard-mrtr."  # the requestState values the bridge issues
CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
# the client capability a server->client request needs (MCP "Client features")
_NEEDS: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


@dataclass(eq=False)
class _Held:
    """A call kept open in its process while the client answers the server's questions."""

    key: tuple[str, str, str]  # method, target, arguments (canonical JSON): what a retry repeats
    capabilities: Mapping[str, Any]
    asked: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[dict[str, Any]] | None = None
    process: StdioProcess | None = None
    pending: PendingCall | None = None
    rounds: int = 0  # input_required answers sent so far
    keys: dict[str, Any] = field(default_factory=dict)  # inputRequests key -> relayed id
    answers: list[dict[str, Any]] = field(default_factory=list)
    state: str | None = None

    async def ask(self, message: dict[str, Any]) -> bool:
        """The process's sink: a question for this call's client, if it can answer it."""
        needed = _NEEDS.get(str(message.get("method")))
        if needed is None or needed not in self.capabilities:
            return False
        self.asked.put_nowait(message)
        return True

    def started(self, process: StdioProcess, pending: PendingCall) -> None:
        self.process, self.pending = process, pending


class BridgeRounds:
    """The bridge's open multi round-trip calls, by the `requestState` it issued."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._held: dict[str, _Held] = {}

    async def forward(
        self,
        calls: StdioCalls,
        upstream: str,
        message: dict[str, Any],
        forwarded: dict[str, Any],
        exchange: Exchange,
    ) -> dict[str, Any]:
        """Serve one stateless request (`forwarded`: without the `_meta` envelope)."""
        method = message.get("method")
        params = message.get("params")
        if method not in METHODS or not isinstance(params, dict):
            return await calls.forward(upstream, forwarded, exchange)
        if "requestState" in params:  # a retry: the bridge issued the state, or refuses it
            return await self._resume(message, exchange, params)
        # (inputResponses without a state answer nothing open: the call starts afresh, as a
        # stateless server would run it; recorded as an unmatched retry)
        meta = params.get("_meta")
        declared = meta.get(CAPABILITIES_KEY) if isinstance(meta, dict) else None
        held = _Held(_key(message), declared if isinstance(declared, dict) else {})
        start_ns = time.time_ns()
        held.task = asyncio.get_running_loop().create_task(
            calls.forward(upstream, forwarded, exchange, sink=held.ask, started=held.started)
        )
        return await self._next(held, message, start_ns)

    async def _resume(
        self, message: dict[str, Any], exchange: Exchange, params: dict[str, Any]
    ) -> dict[str, Any]:
        start_ns = time.time_ns()
        state = params.get("requestState")
        held = self._held.pop(state, None) if isinstance(state, str) else None
        if held is None or held.key != _key(message) or held.task is None or held.task.done():
            pending = self.recorder.start(message, exchange)  # server/mrtr: mrtr_unmatched
            refused = jsonrpc_error(
                message.get("id"), INVALID_PARAMS, "Invalid or expired requestState"
            )
            self.recorder.finish(pending, refused)
            return refused
        responses = params.get("inputResponses")
        responses = responses if isinstance(responses, dict) else {}
        held.answers.append({"round": held.rounds, "responses": responses})
        if held.pending is not None:  # the call's span: one more request, these answers
            span = held.pending.span
            span.set_attribute(semconv.MRTR_ROUNDS, held.rounds + 1)
            _text(span, semconv.MRTR_ANSWERS, held.answers, self.recorder, held)
        for key, relayed_id in held.keys.items():
            answer = responses.get(key)
            if isinstance(answer, dict):
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": relayed_id, "result": answer}
            else:
                reply = jsonrpc_error(relayed_id, INVALID_PARAMS, f"no response for {key}")
            if held.process is not None:
                await held.process.answer_server(reply)
        return await self._next(held, message, start_ns, responses, state)

    async def _next(
        self,
        held: _Held,
        message: dict[str, Any],
        start_ns: int,
        responses: dict[str, Any] | None = None,
        state: Any = None,
    ) -> dict[str, Any]:
        """Wait for the process's next question or its answer; reply to this request."""
        assert held.task is not None
        asking = asyncio.ensure_future(held.asked.get())
        try:
            await asyncio.wait({held.task, asking}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not asking.done():
                asking.cancel()
        if held.task.done():
            if asking.done() and not asking.cancelled():
                held.asked.put_nowait(asking.result())  # (the call ended: nobody will answer)
            reply = dict(held.task.result(), id=message.get("id"))
            if held.rounds:
                self._round(held, message, start_ns, None, responses, state)
            return reply
        questions = [asking.result()]
        while not held.asked.empty():
            questions.append(held.asked.get_nowait())
        held.keys = {}
        requests: dict[str, Any] = {}
        for question in questions:
            key = f"{question.get('method')}#{held.rounds + 1}.{len(requests) + 1}"
            held.keys[key] = question.get("id")
            requests[key] = {"method": question.get("method"), "params": question.get("params", {})}
        held.rounds += 1
        held.state = STATE_PREFIX + secrets.token_urlsafe(18)
        self._held[held.state] = held
        held.task.add_done_callback(lambda _task: self._forget(held))
        self._round(held, message, start_ns, requests, responses, state)
        result = {"resultType": INPUT_REQUIRED, "inputRequests": requests}
        return {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "result": {**result, "requestState": held.state},
        }

    def _forget(self, held: _Held) -> None:
        """The call ended (answered, timed out, process gone): its state is no longer valid."""
        if held.state is not None and self._held.get(held.state) is held:
            del self._held[held.state]

    def _round(
        self,
        held: _Held,
        message: dict[str, Any],
        start_ns: int,
        requests: dict[str, Any] | None,
        responses: dict[str, Any] | None,
        state: Any,
    ) -> None:
        """The span of one HTTP request of the call, under the call's span."""
        call = held.pending.span if held.pending is not None else None
        if not isinstance(call, RecordedSpan):
            return
        attributes = {k: v for k, v in call.attributes.items() if k not in CALL_ONLY}
        attributes.pop(semconv.MRTR_ROUNDS, None)
        attributes.pop(semconv.MRTR_ANSWERS, None)
        attributes[semconv.JSONRPC_REQUEST_ID] = str(message.get("id"))
        attributes[semconv.MRTR_ROUND] = held.rounds if requests is not None else held.rounds + 1
        name = f"round {attributes[semconv.MRTR_ROUND]} · {message.get('method')} {held.key[1]}"
        span = self.recorder.sink.start(name.rstrip(), call.context, attributes, start_ns)
        if requests is not None:
            _text(span, semconv.MRTR_INPUT_REQUESTS, requests, self.recorder, held)
            span.set_attribute(semconv.RPC_RESULT, INPUT_REQUIRED)
        if responses is not None:
            _text(span, semconv.MRTR_INPUT_RESPONSES, responses, self.recorder, held)
        if isinstance(state, str):
            _text(span, semconv.MRTR_REQUEST_STATE, state, self.recorder, held)
        span.end()


def _key(message: Mapping[str, Any]) -> tuple[str, str, str]:
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    target = params.get("name", params.get("uri", ""))
    try:
        arguments = orjson.dumps(params.get("arguments"), option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        arguments = repr(params.get("arguments"))
    return (str(message.get("method")), str(target), arguments)


def _text(span: Any, attribute: str, value: Any, recorder: Recorder, held: _Held) -> None:
    redactor = held.pending.redactor if held.pending is not None else None
    text, truncated = (redactor or recorder.redactor).text(value)
    span.set_attribute(attribute, text)
    if truncated:
        span.set_attribute(semconv.TRUNCATED, True)
