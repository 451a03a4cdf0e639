"""The model side of a stored trace: model turns, the calls the model requested, and the links
between a requested call and the tool span that executed it (docs/llm.md, docs/scorers.md).

A model turn is one `chat` span recorded by the `/llm/` proxy (or sent over OTLP with the same
GenAI attributes). A requested call is linked to the tool span that executed it by tool name
and normalised arguments, earliest request first, and only to a tool span that started after
the model answered (MCP's tools/call carries no tool-call id to match on). The call id then
says which later model request fed the result back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracecard.traces import semconv as sc

from ._json import canonical_json, parse_json_text
from .calls import ToolCall, agent_calls, reported_only
from .types import Span

__all__ = [
    "CallLink",
    "ModelTurn",
    "ModelUsage",
    "RequestedCall",
    "link_calls",
    "model_answer",
    "model_turns",
    "requested_as_tool_calls",
    "requested_links",
    "tool_names",
    "unexecuted_requests",
    "unread_results",
]


@dataclass(frozen=True)
class RequestedCall:
    """A tool call the model asked for in one turn (`complete` False: the stream broke off)."""

    span_id: str  # the model span
    call_id: str | None
    tool: str
    arguments: Any
    complete: bool
    order: int  # position in the run, over every turn


@dataclass(frozen=True)
class ModelTurn:
    """One model request and its answer."""

    span_id: str
    model: str | None
    start_ns: int
    end_ns: int
    input_tokens: int | None
    output_tokens: int | None
    text: str  # the answer's text parts joined
    refusal: str | None
    finish_reasons: tuple[str, ...]
    error_type: str | None
    input_messages: list[dict[str, Any]] = field(default_factory=list)
    output_messages: list[dict[str, Any]] = field(default_factory=list)
    requested: tuple[RequestedCall, ...] = ()

    @property
    def latency_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6

    @property
    def failed(self) -> bool:
        """The request got no whole answer (its span has `error.type`): a model error, not a
        model turn; its usage is unknown unless the upstream reported it."""
        return self.error_type is not None

    def results_read(self) -> set[str]:
        """Tool-call ids whose results this request fed back to the model."""
        return {
            str(part["id"])
            for message in self.input_messages
            for part in _parts(message)
            if part.get("type") == "tool_call_response" and part.get("id") is not None
        }


@dataclass(frozen=True)
class CallLink:
    """A requested call and the tool span that executed it."""

    model_span_id: str
    tool_span_id: str
    call_id: str | None
    tool: str
    order: int  # the requested call's position in the run (RequestedCall.order)


def _parts(message: Any) -> list[dict[str, Any]]:
    parts = message.get("parts") if isinstance(message, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _messages(value: Any) -> list[dict[str, Any]]:
    parsed = parse_json_text(value).value
    return [m for m in parsed if isinstance(m, dict)] if isinstance(parsed, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_turns(spans: Iterable[Span]) -> list[ModelTurn]:
    """The agent's model requests (`gen_ai.operation.name = chat`), in start order."""
    found: list[tuple[int, Span]] = []
    for span in spans:
        attrs = span.get("attributes") or {}
        if attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT and attrs.get(sc.ROLE) != (
            sc.ROLE_VERIFIER
        ):
            found.append((int(span.get("start_time_unix_nano") or 0), span))
    turns: list[ModelTurn] = []
    order = 0
    for start, span in sorted(found, key=lambda pair: pair[0]):
        attrs = span["attributes"]
        span_id = str(span.get("span_id", ""))
        output = _messages(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES))
        texts, refusals = [], []
        for message in output:
            for part in _parts(message):
                if part.get("type") == "text" and isinstance(part.get("content"), str):
                    texts.append(part["content"])
                elif part.get("type") == "refusal" and isinstance(part.get("content"), str):
                    refusals.append(part["content"])
        requested = []
        listed = parse_json_text(attrs.get(sc.LLM_TOOL_CALLS)).value
        for call in listed if isinstance(listed, list) else []:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                continue
            call_id = call.get("id")
            requested.append(
                RequestedCall(
                    span_id=span_id,
                    call_id=str(call_id) if call_id is not None else None,
                    tool=call["name"],
                    arguments=call.get("arguments"),
                    complete=call.get("complete", True) is not False,
                    order=order,
                )
            )
            order += 1
        reasons = attrs.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
        error_type = attrs.get(sc.ERROR_TYPE)
        turns.append(
            ModelTurn(
                span_id=span_id,
                model=attrs.get(sc.GEN_AI_RESPONSE_MODEL) or attrs.get(sc.GEN_AI_REQUEST_MODEL),
                start_ns=start,
                end_ns=int(span.get("end_time_unix_nano") or start),
                input_tokens=_int(attrs.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
                output_tokens=_int(attrs.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
                text="".join(texts),
                refusal="".join(refusals) or None,
                finish_reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else (),
                error_type=str(error_type) if error_type is not None else None,
                input_messages=_messages(attrs.get(sc.GEN_AI_INPUT_MESSAGES)),
                output_messages=output,
                requested=tuple(requested),
            )
        )
    return turns


@dataclass(frozen=True)
class ModelUsage:
    """A run's model requests counted: answered turns apart from failed requests, and tokens
    as reported (None when no request reported them: unknown, not 0)."""

    turns: int  # requests answered
    errors: int  # requests that failed (`ModelTurn.failed`)
    input_tokens: int | None
    output_tokens: int | None
    usage_unknown: int  # requests (answered or failed) that reported no usage
    latency_ms: float

    @classmethod
    def of(cls, turns: Sequence[ModelTurn]) -> ModelUsage:
        inputs = [t.input_tokens for t in turns if t.input_tokens is not None]
        outputs = [t.output_tokens for t in turns if t.output_tokens is not None]
        return cls(
            turns=sum(1 for t in turns if not t.failed),
            errors=sum(1 for t in turns if t.failed),
            input_tokens=sum(inputs) if inputs else None,
            output_tokens=sum(outputs) if outputs else None,
            usage_unknown=sum(
                1 for t in turns if t.input_tokens is None and t.output_tokens is None
            ),
            latency_ms=sum(t.latency_ms for t in turns),
        )

    @property
    def tokens(self) -> int:
        """Input + output tokens as reported (the token budget's measure)."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)


def model_answer(turns: Sequence[ModelTurn]) -> tuple[str, str] | None:
    """(text, span id) of the last model answer with text and no further call requested."""
    for turn in reversed(turns):
        if turn.error_type is None and turn.text.strip() and not turn.requested:
            return turn.text.strip(), turn.span_id
    return None


def _identity(tool: str, arguments: Any) -> str:
    return canonical_json([tool, arguments])


def requested_links(spans: Iterable[Span]) -> dict[str, tuple[str, str | None]]:
    """Tool span id -> (the model span that asked for its call, the call id), from the links
    recorded on the tool spans (`tracecard.link.type = requested_by`, docs/llm.md#links)."""
    found: dict[str, tuple[str, str | None]] = {}
    for span in spans:
        for link in span.get("links") or ():
            if not isinstance(link, dict):
                continue
            attributes = link.get("attributes") or {}
            if attributes.get(sc.LINK_TYPE) == sc.LINK_REQUESTED_BY and link.get("span_id"):
                call_id = (span.get("attributes") or {}).get(sc.GEN_AI_TOOL_CALL_ID)
                found[str(span.get("span_id"))] = (
                    str(link["span_id"]),
                    str(call_id) if call_id is not None else None,
                )
    return found


def link_calls(
    turns: Sequence[ModelTurn],
    calls: Sequence[ToolCall],
    recorded: Mapping[str, tuple[str, str | None]] | None = None,
) -> list[CallLink]:
    """Each tool span linked to the requested call it executed (at most one each way).

    A link the proxy recorded on the tool span (`recorded`, from `requested_links`) is taken
    as it is; tool spans without one (recorded elsewhere, or before links existed) are matched
    by tool name and normalised arguments, earliest request first."""
    requests = [(turn, req) for turn in turns for req in turn.requested]
    taken: set[int] = set()
    links: list[CallLink] = []
    unlinked = []
    for call in sorted(calls, key=lambda c: c.start_ns):
        target = (recorded or {}).get(call.span_id)
        if target is None:
            unlinked.append(call)
            continue
        model_span, call_id = target
        for index, (turn, req) in enumerate(requests):
            same = req.call_id == call_id if call_id is not None else req.tool == call.tool
            if index not in taken and turn.span_id == model_span and same:
                taken.add(index)
                links.append(CallLink(turn.span_id, call.span_id, req.call_id, req.tool, req.order))
                break
    for call in unlinked:
        arguments = call.arguments if call.arguments is not None else call.raw_arguments
        wanted = _identity(call.tool, arguments)
        for index, (turn, req) in enumerate(requests):
            if index in taken or turn.end_ns > call.start_ns or req.tool != call.tool:
                continue
            if _identity(req.tool, req.arguments) == wanted:
                taken.add(index)
                links.append(CallLink(turn.span_id, call.span_id, req.call_id, req.tool, req.order))
                break
    return links


def unexecuted_requests(
    turns: Sequence[ModelTurn], links: Sequence[CallLink], tools_seen: set[str]
) -> list[RequestedCall]:
    """Complete calls the model requested, of a tool the run's tool servers offer or were
    called with, that no tool span executed (the framework dropped or never ran them)."""
    linked = {link.order for link in links}
    return [
        req
        for turn in turns
        for req in turn.requested
        if req.complete and req.tool in tools_seen and req.order not in linked
    ]


def unread_results(turns: Sequence[ModelTurn], links: Sequence[CallLink]) -> list[CallLink]:
    """Executed calls whose result no later model request fed back to the model (by call id).

    Only calls with an id are judged: without one, a result cannot be told apart."""
    start = {turn.span_id: turn.start_ns for turn in turns}
    unread = []
    for link in links:
        if link.call_id is None:
            continue
        asked = start.get(link.model_span_id, 0)
        later = [t for t in turns if t.start_ns > asked]
        if not any(link.call_id in turn.results_read() for turn in later):
            unread.append(link)
    return unread


def requested_as_tool_calls(turns: Sequence[ModelTurn]) -> list[ToolCall]:
    """The model's requested calls in the shape the invocation scorer matches (source=model)."""
    found = []
    for turn in turns:
        for req in turn.requested:
            arguments = req.arguments if isinstance(req.arguments, dict) else None
            found.append(
                ToolCall(
                    span_id=req.span_id,
                    tool=req.tool,
                    upstream=None,
                    arguments=arguments,
                    arguments_error=None if arguments is not None else "not a JSON object",
                    raw_arguments=None,
                    is_error=not req.complete,
                    error_type=None if req.complete else "incomplete",
                    blocked_rule=None,
                    annotations=None,
                    start_ns=turn.end_ns,
                    end_ns=turn.end_ns,
                )
            )
    return found


def tool_names(spans: Iterable[Span]) -> set[str]:
    """Tools the run's tool servers offered (tools/list) or were called with."""
    span_list = list(spans)
    names = {call.tool for call in agent_calls(span_list)}
    for span in span_list:
        attrs = span.get("attributes") or {}
        if attrs.get(sc.MCP_METHOD_NAME) != "tools/list" or reported_only(attrs):
            continue
        listed = parse_json_text(attrs.get(sc.RPC_RESULT)).value
        tools = listed.get("tools") if isinstance(listed, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                names.add(tool["name"])
    return names
