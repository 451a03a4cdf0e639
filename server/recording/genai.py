"""One `chat {model}` span per proxied model request, per the GenAI semantic conventions.

Called after the agent has every byte of the answer. Content attributes (input messages, output
messages, system instructions, tool definitions, requested tool calls) are on by default and go
through the recorder's redaction and truncation like every other payload. docs/llm.md lists the
attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Status, StatusCode

from tracecard.server.recording.genai_input import read_request
from tracecard.server.recording.genai_output import ModelOutput, read_body
from tracecard.server.recording.recorder import Recorder, parse_json, traceparent_of
from tracecard.server.recording.span import parent_of
from tracecard.server.runs.registry import RunInfo
from tracecard.traces import semconv


@dataclass
class ModelExchange:
    """One request to a model upstream and what came back (filled in by the proxy)."""

    run: RunInfo
    upstream: str
    provider: str  # the upstream's kind: "openai" | "anthropic"
    api: str | None  # genai_output.API_*, or None for another endpoint
    method: str
    path: str
    request_body: bytes
    start_ns: int
    headers: list[tuple[str, str]] = field(default_factory=list)  # as forwarded
    trace_headers: dict[str, str] = field(default_factory=dict)
    role: str = semconv.ROLE_AGENT
    role_header: str | None = None  # a client-sent `Tracecard-Role`: recorded, never trusted
    server_address: str | None = None
    server_port: int | None = None
    status_code: int | None = None
    response_body: bytes = b""  # a whole (non-streamed) body, decoded
    response_size: int = 0
    streamed: bool = False
    stream_output: ModelOutput | None = None  # what the SSE stream said
    error: str | None = None  # a transport error type (timeout, upstream_protocol_error...)
    error_text: str = ""
    client_disconnected: bool = False  # the agent hung up before the stream ended
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    stream_raw: bytearray = field(default_factory=bytearray)  # a stream's bytes, decoded
    extra: dict[str, Any] = field(default_factory=dict)  # replay's attributes (server/replay)


def _json(recorder: Recorder, value: Any, attributes: dict[str, Any], key: str) -> bool:
    """Store `value` as redacted, capped JSON text; True when it was cut."""
    text, truncated = recorder.redactor.text(value)
    attributes[key] = text
    return truncated


def _request_attributes(
    recorder: Recorder, exchange: ModelExchange, attributes: dict[str, Any]
) -> tuple[str | None, bool]:
    """The request's model and content; returns the model and whether anything was cut."""
    parsed, problem = parse_json(exchange.request_body)
    if problem is not None:
        if exchange.request_body:
            attributes[semconv.PARSE_ERROR] = f"request body is {problem}"
            attributes[semconv.REQUEST_BODY], cut = recorder.redactor.cut(exchange.request_body)
            return None, cut
        return None, False
    request = read_request(exchange.api, parsed)
    truncated = False
    if request.model:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = request.model
    for key, value in (
        (semconv.GEN_AI_REQUEST_MAX_TOKENS, request.max_tokens),
        (semconv.GEN_AI_REQUEST_TEMPERATURE, request.temperature),
        (semconv.GEN_AI_REQUEST_TOP_P, request.top_p),
    ):
        if value is not None:
            attributes[key] = value
    if not recorder.settings.model_content:
        return request.model, False
    if exchange.api is None:
        truncated = _json(recorder, parsed, attributes, semconv.REQUEST_BODY)
        return request.model, truncated
    truncated |= _json(recorder, request.messages, attributes, semconv.GEN_AI_INPUT_MESSAGES)
    if request.system:
        truncated |= _json(recorder, request.system, attributes, semconv.GEN_AI_SYSTEM_INSTRUCTIONS)
    if request.tools:
        truncated |= _json(recorder, request.tools, attributes, semconv.GEN_AI_TOOL_DEFINITIONS)
    return request.model, truncated


def _response_output(
    recorder: Recorder, exchange: ModelExchange, attributes: dict[str, Any]
) -> tuple[ModelOutput | None, bool]:
    """What the model answered: the stream's reading, or the parsed body (raw when not JSON)."""
    if exchange.stream_output is not None:
        return exchange.stream_output, False
    body = exchange.response_body
    if not body:
        return None, False
    parsed, problem = parse_json(body) if exchange.response_size <= len(body) else (None, "cut")
    if problem is not None:
        text, cut = recorder.redactor.cut(body)
        if exchange.response_size > len(body):
            text = f"{text}…[truncated by tracecard: original size {exchange.response_size} bytes]"
            cut = True
        else:
            attributes[semconv.PARSE_ERROR] = f"response body is {problem}"
        attributes[semconv.RESPONSE_BODY] = text
        return None, cut
    output = read_body(exchange.api, parsed) if exchange.api else ModelOutput()
    cut = False
    if exchange.api is None or output.error_message is not None:
        cut = _json(recorder, parsed, attributes, semconv.RESPONSE_BODY)
    return output, cut


def _output_attributes(
    recorder: Recorder, exchange: ModelExchange, output: ModelOutput, attributes: dict[str, Any]
) -> bool:
    if output.response_id:
        attributes[semconv.GEN_AI_RESPONSE_ID] = output.response_id
    if output.model:
        attributes[semconv.GEN_AI_RESPONSE_MODEL] = output.model
    if output.finish_reasons:
        attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = output.finish_reasons
    if output.input_tokens is not None:
        attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = output.input_tokens
    if output.output_tokens is not None:
        attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = output.output_tokens
    if output.first_output_ns is not None:
        ttft = (output.first_output_ns - exchange.start_ns) / 1e6
        attributes[semconv.LLM_TTFT_MS] = round(max(ttft, 0.0), 3)
    if output.error_message:
        attributes[semconv.LLM_ERROR_MESSAGE] = output.error_message
    if exchange.streamed:
        attributes[semconv.LLM_STREAM_COMPLETE] = output.complete
    truncated = False
    if output.choices:
        if recorder.settings.model_content:
            messages = output.messages()
            truncated |= _json(recorder, messages, attributes, semconv.GEN_AI_OUTPUT_MESSAGES)
        calls = output.tool_calls()
        if calls:
            truncated |= _json(recorder, calls, attributes, semconv.LLM_TOOL_CALLS)
    return truncated


def _status(exchange: ModelExchange, output: ModelOutput | None) -> tuple[str | None, Status]:
    """`error.type` and status: the upstream's failure first (transport, HTTP status, an error
    in the body or stream), whatever the agent did after it; the agent hanging up only when
    the upstream had not failed (docs/llm.md#errors)."""
    if exchange.error is not None:
        return exchange.error, Status(StatusCode.ERROR, exchange.error_text or exchange.error)
    code = exchange.status_code
    if code is not None and code >= 400:
        detail = (output.error_message if output else None) or f"HTTP {code}"
        return str(code), Status(StatusCode.ERROR, detail)
    if output is not None and output.error_message:
        return output.error_type or "model_error", Status(StatusCode.ERROR, output.error_message)
    if exchange.client_disconnected:
        message = "the agent disconnected before the stream ended"
        return semconv.ERR_CLIENT_DISCONNECTED, Status(StatusCode.ERROR, message)
    if exchange.streamed and output is not None and not output.complete:
        return semconv.ERR_PROTOCOL, Status(StatusCode.ERROR, "the stream ended before its end")
    return None, Status(StatusCode.UNSET)


def _headers(recorder: Recorder, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return recorder.redactor.header_items(headers)


def record_model_call(recorder: Recorder, exchange: ModelExchange, end_ns: int) -> None:
    """Build and end the exchange's span (never raises on what the agent or model sent)."""
    attributes: dict[str, Any] = {
        semconv.RUN_ID: exchange.run.id,
        semconv.UPSTREAM: exchange.upstream,
        semconv.ROLE: exchange.role,
        semconv.NETWORK_TRANSPORT: "tcp",
        semconv.GEN_AI_PROVIDER_NAME: exchange.provider,
        semconv.HTTP_REQUEST_METHOD: exchange.method,
        semconv.URL_PATH: f"/{exchange.path}",
        semconv.LLM_STREAM: exchange.streamed,
        **_headers(recorder, exchange.headers),
    }
    if exchange.role_header is not None:
        attributes[semconv.ROLE_HEADER] = exchange.role_header
    if exchange.api is not None:
        attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.OP_CHAT
        attributes[semconv.LLM_API] = exchange.api
    if exchange.server_address:
        attributes[semconv.SERVER_ADDRESS] = exchange.server_address
    if exchange.server_port:
        attributes[semconv.SERVER_PORT] = exchange.server_port
    model, truncated = _request_attributes(recorder, exchange, attributes)
    if exchange.status_code is not None:
        attributes[semconv.HTTP_RESPONSE_STATUS_CODE] = exchange.status_code
    output, cut = _response_output(recorder, exchange, attributes)
    truncated |= cut
    if output is not None:
        truncated |= _output_attributes(recorder, exchange, output, attributes)
    error, status = _status(exchange, output)
    if error is not None:
        attributes[semconv.ERROR_TYPE] = error
    if exchange.client_disconnected:
        attributes[semconv.LLM_CLIENT_DISCONNECTED] = True
    if truncated:
        attributes[semconv.TRUNCATED] = True
    attributes.update(exchange.extra)
    if exchange.api is not None:
        name = f"{semconv.OP_CHAT} {model or (output.model if output else None) or 'unknown'}"
    else:
        name = f"{exchange.method} /{exchange.path}"
    parent = (
        traceparent_of({}, exchange.trace_headers, exchange.run, attributes) or exchange.run.context
    )
    span = recorder.sink.start(name, parent_of(parent), attributes, exchange.start_ns)
    span.set_status(status)
    span.end(end_ns)
    if output is not None and exchange.role != semconv.ROLE_VERIFIER:
        # the tool spans that run these calls link back to this span (recording/tool_links.py)
        recorder.tool_links.requested(exchange.run.id, span.context, output.tool_calls(), end_ns)
