"""Multi round-trip requests (MCP 2026-07-28, SEP-2322) recorded as one logical call.

A server may answer `tools/call` (also `prompts/get`, `resources/read`) with
`{"resultType": "input_required", "inputRequests": {...}, "requestState": "..."}`; the client
gathers the answers (elicitation, sampling, roots) and sends the same request again with
`inputResponses` (and the `requestState` echoed). On the wire that is two or more requests; to
the agent, the task and the scorers it is one call. The recorder (server/recording/recorder.py)
calls this module when a request starts, is answered or fails:

- the first `input_required` answer turns the request's span into round 1 of a new parent span,
  `tools/call {tool}`, that carries what a call's span carries (tool, arguments, annotations, the
  model's call id); round spans keep only the wire (`round N · tools/call {tool}`, the server's
  `inputRequests`, the client's `inputResponses`), so nothing reads a round as a call;
- a retry joins the open call its `requestState` names, else the latest open call of the same
  tool with the same arguments in the same run and upstream (the wire carries nothing else: two
  parallel calls of one tool with equal arguments and no `requestState` cannot be told apart,
  and the later one is taken);
- the final answer closes the round and the parent, which gets the result and
  `tracecard.mrtr.rounds`;
- a retry that names no open call (or changes the tool or arguments) is recorded as a call of its
  own with `error.type = mrtr_unmatched`; a call the client never retried ends, when its run
  finishes, after `IDLE_S` or at shutdown, with `error.type = mrtr_incomplete`.

Everything is in memory, on the recording path (after the agent has its bytes).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from tracecard.server.recording.span import RecordedSpan
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.recording.recorder import PendingCall, Recorder

# The methods whose result may be `input_required` (MCP 2026-07-28, `InputRequiredResult`).
METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
INPUT_REQUIRED: Final = "input_required"
IDLE_S: Final = 600.0  # a call waiting this long for the client's retry is ended as incomplete
OPEN_MAX: Final = 10_000  # calls waiting for a retry; the oldest is ended first
# what a call's span says about the tool; a round's span leaves it to its parent
CALL_ONLY: Final = (
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_TOOL_NAME,
    semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
    semconv.GEN_AI_TOOL_CALL_ID,
    semconv.TOOL_ANNOTATIONS,
    semconv.SAFETY_CHECKED,
    semconv.RPC_PARAMS,
    semconv.AGENT_TRACE_ID,
)
_Key = tuple[str, str, str, str, str]  # run id, upstream, method, target, arguments (as stored)


@dataclass(eq=False)
class LogicalCall:
    """One call made of rounds: its parent span is open until the final answer."""

    call: PendingCall  # the parent span, as a pending call (closed by `Recorder.complete`)
    span: RecordedSpan  # that span (`call.span`, typed)
    key: _Key
    rounds: int = 1
    state: str | None = None  # the `requestState` the client must echo, if the server sent one
    answers: list[dict[str, Any]] = field(default_factory=list)  # each round's inputResponses
    seen: float = field(default_factory=time.monotonic)


class LogicalCalls:
    """The open logical calls of one server (both recorders: the proxy's and the bridge's)."""

    def __init__(self) -> None:
        self._rounds: dict[int, LogicalCall] = {}  # span id of a round in flight -> its call
        self._unmatched: set[int] = set()  # span ids of retries that matched no open call
        self._waiting: OrderedDict[int, LogicalCall] = OrderedDict()  # by parent span id
        self._by_state: dict[tuple[str, str, str], LogicalCall] = {}
        self._by_call: dict[_Key, list[LogicalCall]] = {}
        self._recorder: Recorder | None = None  # closes calls that end outside a response

    # --- the recorder's hooks --------------------------------------------------------------------
    def started(self, pending: PendingCall, message: Mapping[str, Any]) -> None:
        """A request's span was opened: a retry joins its logical call as the next round."""
        if pending.method not in METHODS or pending.request_id is None:
            return
        params = message.get("params")
        if not isinstance(params, dict):
            return
        if "inputResponses" not in params and "requestState" not in params:
            return
        span = pending.span
        if not isinstance(span, RecordedSpan):
            return
        responses = params.get("inputResponses")
        state = params.get("requestState")
        logical = self._match(_key_of(span, pending.method), state)
        if logical is None:
            self._unmatched.add(span.context.span_id)
            _record_inputs(span, pending, responses, state)
            return
        self._unwait(logical)
        logical.rounds += 1
        logical.seen = time.monotonic()
        if responses is not None:
            logical.answers.append({"round": logical.rounds - 1, "responses": responses})
        pending.tool_call = None  # the model's call is the logical one, linked once
        _as_round(span, logical, pending.method)
        _record_inputs(span, pending, responses, state)
        self._rounds[span.context.span_id] = logical

    def answered(
        self, recorder: Recorder, pending: PendingCall, response: Mapping[str, Any] | None
    ) -> bool:
        """A response arrived; True when this module recorded it (a round, or an unmatched
        retry), False for an ordinary call (the recorder closes it as usual)."""
        span = pending.span
        if not isinstance(span, RecordedSpan):
            return False
        span_id = span.context.span_id
        logical = self._rounds.pop(span_id, None)
        self._recorder = recorder
        result = response.get("result") if response is not None else None
        asks = isinstance(result, dict) and result.get("resultType") == INPUT_REQUIRED
        if logical is None:
            if span_id in self._unmatched:
                self._unmatched.discard(span_id)
                text = "a retry (inputResponses/requestState) of no open call"
                recorder.complete(pending, response, semconv.ERR_MRTR_UNMATCHED, text)
                return True
            if not asks or pending.method not in METHODS:
                return False
            logical = self._open(recorder, pending, span)
        if asks:
            assert isinstance(result, dict)
            redactor = pending.redactor or recorder.redactor
            _text(span, semconv.MRTR_INPUT_REQUESTS, result.get("inputRequests"), redactor)
            state = result.get("requestState")
            logical.state = state if isinstance(state, str) else None
            span.set_attribute(semconv.RPC_RESULT, "input_required")
            span.end()
            self._wait(logical)
            return True
        # the final answer: the round ends, the logical call gets the result and ends after it
        error = response.get("error") if response is not None else None
        if isinstance(error, dict):
            span.set_attribute(semconv.RPC_RESPONSE_STATUS_CODE, str(error.get("code")))
            span.set_attribute(semconv.JSONRPC_ERROR_MESSAGE, str(error.get("message") or ""))
        span.end()
        self._close(recorder, logical, response)
        return True

    def failed(
        self, recorder: Recorder, pending: PendingCall, error_type: str, message: str
    ) -> None:
        """A request failed in transport: a round's failure ends its logical call too."""
        span_id = pending.span.get_span_context().span_id
        self._unmatched.discard(span_id)
        logical = self._rounds.pop(span_id, None)
        if logical is not None:
            self._close(recorder, logical, None, error_type, message)

    # --- ending calls the client never retried ---------------------------------------------------
    def end_run(self, run_id: str) -> int:
        """End the run's calls still waiting for a retry (the run finished); how many."""
        ended = [c for c in self._waiting.values() if c.key[0] == run_id]
        for logical in ended:
            self._abandon(logical, "the run ended before the client retried")
        return len(ended)

    def sweep(self, idle_s: float = IDLE_S) -> int:
        """End calls that waited longer than `idle_s` for a retry; how many."""
        now = time.monotonic()
        stale = [c for c in self._waiting.values() if now - c.seen > idle_s]
        for logical in stale:
            self._abandon(logical, f"no retry within {idle_s:g} s")
        return len(stale)

    def close(self) -> None:
        """Shutdown: every call still waiting ends, so none is lost."""
        for logical in list(self._waiting.values()):
            self._abandon(logical, "tracecard stopped before the client retried")

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    # --- internals -------------------------------------------------------------------------------
    def _open(self, recorder: Recorder, first: PendingCall, span: RecordedSpan) -> LogicalCall:
        """Round 1 asked for input: a parent span takes over what the call's span said."""
        from tracecard.server.recording.recorder import PendingCall

        attributes = dict(span.attributes)
        parent_span = recorder.sink.start(span.name, span.parent, attributes, span.start_ns)
        parent_span.links.extend(span.links)
        call = PendingCall(
            span=parent_span,
            method=first.method,
            request_id=first.request_id,
            redactor=first.redactor,
            tool_call=first.tool_call,
        )
        first.tool_call = None
        key = _key_of(parent_span, first.method)
        logical = LogicalCall(call=call, span=parent_span, key=key)
        _as_round(span, logical, first.method)
        return logical

    def _match(self, key: _Key, state: Any) -> LogicalCall | None:
        if isinstance(state, str):
            logical = self._by_state.get((key[0], key[1], state))
            return logical if logical is not None and logical.key == key else None
        candidates = self._by_call.get(key)
        return candidates[-1] if candidates else None

    def _wait(self, logical: LogicalCall) -> None:
        logical.seen = time.monotonic()
        self._waiting[logical.span.context.span_id] = logical
        if logical.state is not None:
            self._by_state[(logical.key[0], logical.key[1], logical.state)] = logical
        self._by_call.setdefault(logical.key, []).append(logical)
        while len(self._waiting) > OPEN_MAX:
            oldest = next(iter(self._waiting.values()))
            self._abandon(oldest, "too many calls waiting for a retry")

    def _unwait(self, logical: LogicalCall) -> None:
        self._waiting.pop(logical.span.context.span_id, None)
        if logical.state is not None:
            self._by_state.pop((logical.key[0], logical.key[1], logical.state), None)
        candidates = self._by_call.get(logical.key)
        if candidates is not None and logical in candidates:
            candidates.remove(logical)
            if not candidates:
                del self._by_call[logical.key]

    def _close(
        self,
        recorder: Recorder,
        logical: LogicalCall,
        response: Mapping[str, Any] | None,
        error_type: str | None = None,
        message: str = "",
    ) -> None:
        span = logical.span
        span.set_attribute(semconv.MRTR_ROUNDS, logical.rounds)
        if logical.answers:
            redactor = logical.call.redactor or recorder.redactor
            _text(span, semconv.MRTR_ANSWERS, logical.answers, redactor)
        if error_type is not None:
            recorder.fail(logical.call, error_type, message)
        else:
            recorder.complete(logical.call, response)

    def _abandon(self, logical: LogicalCall, why: str) -> None:
        """A call the client never retried ends as incomplete (its answers so far kept)."""
        self._unwait(logical)
        recorder = self._recorder
        assert recorder is not None  # a call waits only after a recorder answered it
        self._close(recorder, logical, None, semconv.ERR_MRTR_INCOMPLETE, why)


def _key_of(span: RecordedSpan, method: str) -> _Key:
    """What a retry must repeat: run, upstream, method, target and, for tools/call, the
    arguments as recorded (redaction fingerprints are equal for equal values). A prompt's
    arguments are not compared: its recorded params hold the round's inputResponses too."""
    attributes = span.attributes
    target = span.name[len(method) + 1 :] if span.name.startswith(method + " ") else ""
    arguments = ""
    if method == "tools/call":
        arguments = str(attributes.get(semconv.GEN_AI_TOOL_CALL_ARGUMENTS, ""))
    return (
        str(attributes.get(semconv.RUN_ID, "")),
        str(attributes.get(semconv.UPSTREAM, "")),
        method,
        target,
        arguments,
    )


def _as_round(span: RecordedSpan, logical: LogicalCall, method: str) -> None:
    """A round's span: under the logical call, named so no reader takes it for a call."""
    span.parent = logical.span.context
    for name in CALL_ONLY:
        span.attributes.pop(name, None)
    span.attributes[semconv.MRTR_ROUND] = logical.rounds
    target = logical.key[3]
    span.name = f"round {logical.rounds} · {method} {target}".rstrip()


def _record_inputs(span: RecordedSpan, pending: PendingCall, responses: Any, state: Any) -> None:
    redactor = pending.redactor
    if redactor is None:
        return
    if responses is not None:
        _text(span, semconv.MRTR_INPUT_RESPONSES, responses, redactor)
    if isinstance(state, str):
        _text(span, semconv.MRTR_REQUEST_STATE, state, redactor)


def _text(span: RecordedSpan, attribute: str, value: Any, redactor: Any) -> None:
    text, truncated = redactor.text(value)
    span.set_attribute(attribute, text)
    if truncated:
        span.set_attribute(semconv.TRUNCATED, True)
