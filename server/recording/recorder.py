"""Turning proxied JSON-RPC messages into spans: shared by the HTTP proxy and the stdio bridge.

The recorder is called after the agent has its bytes: it parses only what a span needs,
redacts secrets and truncates large payloads before anything is handed to the SDK, whose
`BatchSpanProcessor` writes to the database on its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from tracecard.server.hooks import Hooks
from tracecard.server.recording.messages import is_verifier as is_verifier
from tracecard.server.recording.messages import is_version_probe as is_version_probe
from tracecard.server.recording.messages import message_target as message_target
from tracecard.server.recording.messages import parse_json as parse_json
from tracecard.server.recording.messages import traceparent_header as traceparent_header
from tracecard.server.recording.messages import traceparent_of as traceparent_of
from tracecard.server.recording.redaction import Redactor
from tracecard.server.recording.span import SpanSink, parent_of
from tracecard.server.recording.tool_links import META_KEY, ToolCallLinks
from tracecard.server.runs.registry import RunInfo
from tracecard.server.settings import RecordingSettings
from tracecard.traces import semconv

# The server's own probe traffic presents the database's verifier key in this header (never
# forwarded); a client's `Tracecard-Role` header is recorded and changes nothing.
VERIFIER_HEADER: Final = "Tracecard-Verifier"
# Messages the server sends to the client (GET stream, or requests on a POST stream) are marked
# with this attribute; their spans are kept apart from the agent's own calls by it.
DIRECTION: Final = "tracecard.mcp.direction"
SERVER_TO_CLIENT: Final = "server_to_client"


@dataclass(slots=True)
class Exchange:
    """Where a message travels: fixed per request (or per stdio process)."""

    run: RunInfo
    upstream: str
    transport: str = "tcp"  # "tcp" for HTTP upstreams, "pipe" for stdio
    server_address: str | None = None
    server_port: int | None = None
    session_id: str | None = None
    protocol_version: str | None = None
    role: str = semconv.ROLE_AGENT
    role_header: str | None = None  # a client-sent `Tracecard-Role`, recorded as present
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class PendingCall:
    """A request whose span is open until its response (or failure) is recorded."""

    span: Span
    method: str
    request_id: Any
    redactor: Redactor | None = None  # the upstream's (None: the recorder's default)
    # tools/call: (run id, tool, arguments as sent, the framework's forwarded call id)
    tool_call: tuple[str, str, Any, str | None] | None = None


class Recorder:
    """Opens a span per JSON-RPC request and closes it with the response.

    Spans are `RecordedSpan`s (plain attribute dicts, one `ReadableSpan` handed to the
    tracer's processor at the end): the SDK's per-attribute checks and locks cost ~15 % of
    the proxy's CPU, for attributes that are known-good here.
    """

    def __init__(
        self,
        tracer: Tracer,
        settings: RecordingSettings,
        key: bytes | None = b"",
        plain_upstreams: Iterable[str] = (),
        hooks: Hooks | None = None,
        tool_links: ToolCallLinks | None = None,
    ) -> None:
        self.tracer = tracer
        self.hooks = hooks  # `argument_checks`: safety rules on arguments before redaction
        self.sink = SpanSink(tracer)
        self.redactor = Redactor(settings, key)
        self._plain = self.redactor.plain()
        self.plain_upstreams = frozenset(plain_upstreams)  # `redact = false`
        self.settings = settings
        # model-requested calls -> the tool spans that ran them (shared by every recorder of
        # one server: the runtime's)
        self.tool_links = tool_links if tool_links is not None else ToolCallLinks()
        # multi round-trip requests: rounds of one logical call (server/mrtr), when installed
        self.mrtr = hooks.mrtr if hooks is not None else None

    def redactor_for(self, upstream: str) -> Redactor:
        """The upstream's redactor: values in clear for `redact = false`, headers always hidden."""
        return self._plain if upstream in self.plain_upstreams else self.redactor

    def _base_attributes(self, exchange: Exchange) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            semconv.RUN_ID: exchange.run.id,
            semconv.UPSTREAM: exchange.upstream,
            semconv.ROLE: exchange.role,
            semconv.NETWORK_TRANSPORT: exchange.transport,
        }
        if exchange.role_header is not None:
            attributes[semconv.ROLE_HEADER] = exchange.role_header
        if exchange.server_address:
            attributes[semconv.SERVER_ADDRESS] = exchange.server_address
        if exchange.server_port:
            attributes[semconv.SERVER_PORT] = exchange.server_port
        if exchange.session_id:
            attributes[semconv.MCP_SESSION_ID] = exchange.session_id
        if exchange.protocol_version:
            attributes[semconv.MCP_PROTOCOL_VERSION] = exchange.protocol_version
        return attributes

    def start(
        self,
        message: Mapping[str, Any],
        exchange: Exchange,
        start_ns: int | None = None,
        parent: Context | None = None,
    ) -> PendingCall:
        """Open the span of a request or notification (`message` is one parsed JSON-RPC).

        The parent is `parent` when given, else the agent's `traceparent`, else the run's root.
        """
        method = str(message.get("method") or "unknown")
        target = message_target(message)
        attributes = self._base_attributes(exchange)
        attributes[semconv.MCP_METHOD_NAME] = method
        truncated = False
        redactor = self.redactor_for(exchange.upstream)
        request_id = message.get("id")
        if request_id is not None:
            attributes[semconv.JSONRPC_REQUEST_ID] = str(request_id)
        params = message.get("params")
        if method == "tools/call" and isinstance(params, dict):
            attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.OP_EXECUTE_TOOL
            if target is not None:
                attributes[semconv.GEN_AI_TOOL_NAME] = target
            arguments, truncated = redactor.text(params.get("arguments") or {})
            attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = arguments
            if target is not None and "[redacted:" in arguments:  # (see `safety_checked`)
                sent = params.get("arguments")
                checked = self.safety_checked(exchange.run, target, lambda: sent, arguments)
                if checked is not None:
                    attributes[semconv.SAFETY_CHECKED] = checked
        elif params is not None:
            attributes[semconv.RPC_PARAMS], truncated = redactor.text(params)
        if truncated:
            attributes[semconv.TRUNCATED] = True
        if parent is None:
            parent = (
                traceparent_of(message, exchange.headers, exchange.run, attributes)
                or exchange.run.context
            )
        name = f"{method} {target}" if target else method
        span = self.sink.start(name, parent_of(parent), attributes, start_ns)
        pending = PendingCall(span=span, method=method, request_id=request_id, redactor=redactor)
        if method == "tools/call" and target is not None and isinstance(params, dict):
            meta = params.get("_meta")
            forwarded = meta.get(META_KEY) if isinstance(meta, dict) else None
            forwarded = str(forwarded) if isinstance(forwarded, str | int) else None
            pending.tool_call = (exchange.run.id, target, params.get("arguments"), forwarded)
        if self.mrtr is not None:
            self.mrtr.started(pending, message)
        return pending

    def _link_requested(self, pending: PendingCall) -> None:
        """A tools/call span's `gen_ai.tool.call.id` and its link to the model span that asked
        for the call (server/recording/tool_links.py), before the span ends."""
        if pending.tool_call is None:
            return
        run_id, tool, arguments, forwarded = pending.tool_call
        span = pending.span
        start_ns = getattr(span, "start_ns", 0)
        requested, call_id, source = self.tool_links.executed(
            run_id, tool, arguments, start_ns, forwarded
        )
        if call_id is not None:
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_ID, call_id)
        if source is not None:
            span.set_attribute(semconv.TOOL_CALL_ID_SOURCE, source)
        if requested is not None:
            link: dict[str, Any] = {semconv.LINK_TYPE: semconv.LINK_REQUESTED_BY}
            if call_id is not None:
                link[semconv.GEN_AI_TOOL_CALL_ID] = call_id
            span.add_link(requested.context, link)

    def finish(self, pending: PendingCall, response: Mapping[str, Any] | None) -> None:
        """Close the span with the JSON-RPC response (None for a notification)."""
        if self.mrtr is not None and self.mrtr.answered(self, pending, response):
            return  # a round of a multi round-trip call: server/mrtr closes it
        self.complete(pending, response)

    def complete(
        self,
        pending: PendingCall,
        response: Mapping[str, Any] | None,
        error_type: str | None = None,
        error_message: str = "",
    ) -> None:
        """Close the span with the response as one whole call (`finish` without the MRTR
        hook; server/mrtr closes a logical call with it), `error_type` over any other."""
        span = pending.span
        if response is not None:
            error = response.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                span.set_attribute(semconv.RPC_RESPONSE_STATUS_CODE, str(code))
                message = str(error.get("message") or "")
                span.set_attribute(semconv.JSONRPC_ERROR_MESSAGE, message)
                if is_version_probe(pending.method, str(code)):
                    span.set_attribute(semconv.PROBE, semconv.PROBE_VERSION)
                else:
                    span.set_attribute(semconv.ERROR_TYPE, str(code))
                    span.set_status(Status(StatusCode.ERROR, message))
            else:
                redactor = pending.redactor or self.redactor
                self._record_result(span, pending.method, response.get("result"), redactor)
        if error_type is not None:
            span.set_attribute(semconv.ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, error_message))
        self._link_requested(pending)
        span.end()

    def _record_result(self, span: Span, method: str, result: Any, redactor: Redactor) -> None:
        text, truncated = redactor.text(result)
        if method == "tools/call":
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, text)
            is_error = isinstance(result, dict) and bool(result.get("isError"))
            span.set_attribute(semconv.TOOL_IS_ERROR, is_error)
            if is_error:
                span.set_attribute(semconv.ERROR_TYPE, semconv.ERR_TOOL)
                span.set_status(Status(StatusCode.ERROR, "tool returned isError"))
        else:
            span.set_attribute(semconv.RPC_RESULT, text)
        if truncated:
            span.set_attribute(semconv.TRUNCATED, True)

    def fail(self, pending: PendingCall, error_type: str, message: str) -> None:
        """Close the span with a transport failure (`timeout`, `upstream_unavailable`, ...)."""
        if self.mrtr is not None:
            self.mrtr.failed(self, pending, error_type, message)
        if is_version_probe(pending.method, error_type):  # an older server's HTTP 4xx
            pending.span.set_attribute(semconv.PROBE, semconv.PROBE_VERSION)
            pending.span.set_attribute(semconv.JSONRPC_ERROR_MESSAGE, message)
        else:
            pending.span.set_attribute(semconv.ERROR_TYPE, error_type)
            pending.span.set_status(Status(StatusCode.ERROR, message))
        self._link_requested(pending)
        pending.span.end()

    def unparsable(self, raw: bytes, reason: str, exchange: Exchange, name: str) -> Span:
        """An open span for a body that is not JSON-RPC; the caller ends it."""
        attributes = self._base_attributes(exchange)
        attributes[semconv.PARSE_ERROR] = reason
        attributes[semconv.REQUEST_BODY], truncated = self.redactor.cut(raw)
        if truncated:
            attributes[semconv.TRUNCATED] = True
        return self.sink.start(name, parent_of(exchange.run.context), attributes)

    def note(self, pending: PendingCall, message: Mapping[str, Any]) -> None:
        """A server notification about an open call (progress, logging) as an event on its span."""
        method = str(message.get("method") or "notification")
        attributes: dict[str, Any] = {semconv.MCP_METHOD_NAME: method}
        params = message.get("params")
        if params is not None:
            redactor = pending.redactor or self.redactor
            attributes[semconv.RPC_PARAMS], truncated = redactor.text(params)
            if truncated:
                attributes[semconv.TRUNCATED] = True
        pending.span.add_event(method, attributes)

    def reply(self, message: Mapping[str, Any], exchange: Exchange) -> None:
        """A JSON-RPC response the agent sent that answers no request tracecard saw."""
        attributes = self._base_attributes(exchange)
        attributes[semconv.MCP_METHOD_NAME] = "response"
        if message.get("id") is not None:
            attributes[semconv.JSONRPC_REQUEST_ID] = str(message.get("id"))
        span = self.sink.start("response", parent_of(exchange.run.context), attributes)
        pending = PendingCall(
            span=span,
            method="response",
            request_id=message.get("id"),
            redactor=self.redactor_for(exchange.upstream),
        )
        self.finish(pending, message)

    def safety_checked(
        self, run: RunInfo, tool: str, arguments: Callable[[], Any], stored: str
    ) -> str | None:
        """`tracecard.safety.checked` for a call whose stored arguments (`stored`) are redacted:
        the task's argument-pattern rules on the arguments as sent (MCP and plain HTTP alike).
        `arguments` is asked for only then (a plain HTTP body is parsed only for such a call)."""
        checks = self.hooks.argument_checks if self.hooks is not None else None
        if checks is None or "[redacted:" not in stored:
            return None
        return checks(run, tool, arguments())

    def annotate(self, pending: PendingCall, annotations: Mapping[str, Any]) -> None:
        """The tool's annotations (from the upstream's tools/list) on a tools/call span."""
        pending.span.set_attribute(
            semconv.TOOL_ANNOTATIONS, orjson.dumps(annotations, default=str).decode()
        )

    def block(self, pending: PendingCall, rule_id: str, message: str) -> None:
        """Close the span of a call that enforce mode did not forward."""
        pending.span.set_attribute(semconv.BLOCKED_RULE, rule_id)
        self.fail(pending, semconv.ERR_BLOCKED, message)
