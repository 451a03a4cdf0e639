"""Read tool calls and probe observations out of a stored trace (a list of span dicts)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tracecard.traces import semconv as sc

from ._json import parse_json_text
from .types import Span

__all__ = [
    "ProbeObservation",
    "ToolCall",
    "agent_calls",
    "probe_observations",
    "reported_calls",
    "reported_only",
    "tool_annotations",
]

TOOLS_CALL = "tools/call"
TOOLS_LIST = "tools/list"


@dataclass(frozen=True)
class ToolCall:
    """One tool call the agent attempted (blocked calls included), in start-time order."""

    span_id: str
    tool: str
    upstream: str | None
    arguments: dict[str, Any] | None  # None when the arguments text could not be parsed
    arguments_error: str | None
    raw_arguments: str | None
    is_error: bool
    error_type: str | None
    blocked_rule: str | None
    annotations: dict[str, Any] | None
    start_ns: int
    end_ns: int
    result: dict[str, Any] | None = None  # the CallToolResult, when recorded and readable
    # argument-pattern rules checked on the arguments as sent (`tracecard.safety.checked`)
    checked: dict[str, Any] | None = None
    # a multi round-trip call (MCP 2026-07-28): how many requests it took on the wire, and the
    # client's answers to the server's questions, [{round, responses}] (None: it asked none)
    rounds: int = 1
    answers: list[dict[str, Any]] | None = None

    @property
    def result_text(self) -> str | None:
        """The result's text content items joined by newlines (None: no readable result)."""
        content = self.result.get("content") if self.result else None
        if not isinstance(content, list):
            return None
        texts = [
            c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)
        ]
        return "\n".join(texts)

    @property
    def blocked(self) -> bool:
        """The proxy refused the call in enforce mode."""
        return self.error_type == sc.ERR_BLOCKED or self.blocked_rule is not None

    @property
    def latency_ms(self) -> float:
        """Wall time of the call in milliseconds."""
        return max(0, self.end_ns - self.start_ns) / 1e6


@dataclass(frozen=True)
class ProbeObservation:
    """The latest verifier span of one probe."""

    probe_id: str
    span_id: str
    kind: str | None
    value: Any
    error: str | None


def _attrs(span: Span) -> dict[str, Any]:
    attrs = span.get("attributes")
    return attrs if isinstance(attrs, dict) else {}


def _start(span: Span) -> int:
    return int(span.get("start_time_unix_nano") or 0)


def _tool_name(span: Span, attrs: dict[str, Any]) -> str | None:
    name = attrs.get(sc.GEN_AI_TOOL_NAME)
    if isinstance(name, str) and name:
        return name
    span_name = str(span.get("name") or "")
    prefix = TOOLS_CALL + " "
    return span_name[len(prefix) :] if span_name.startswith(prefix) else None


def reported_only(attrs: dict[str, Any]) -> bool:
    """An ingested span that looks like a recorded call but that tracecard did not observe
    (no proxy, bridge or `tracecard wrap` saw it): shown, never evidence."""
    return attrs.get(sc.EVIDENCE) == sc.EVIDENCE_AGENT_REPORTED


def _as_call(span: Span, reported: bool = False) -> ToolCall | None:
    attrs = _attrs(span)
    if reported_only(attrs) != reported or (not reported and attrs.get(sc.ROLE) != sc.ROLE_AGENT):
        return None  # an agent-reported span has no role: ingest keeps only the claim
    truncated = bool(attrs.get(sc.TRUNCATED))
    method = attrs.get(sc.MCP_METHOD_NAME)
    if method == TOOLS_CALL:
        tool = _tool_name(span, attrs)
        raw = attrs.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS)
        is_error = bool(attrs.get(sc.TOOL_IS_ERROR)) or attrs.get(sc.ERROR_TYPE) is not None
    elif attrs.get(sc.GEN_AI_PROVIDER_NAME) is not None:
        return None  # a model call (the /llm/ proxy): read by scorers.model, never a tool call
    elif method is None and attrs.get(sc.HTTP_REQUEST_METHOD) is not None:
        # A plain HTTP tool: named by its method and path unless the proxy named it.
        http_method = str(attrs[sc.HTTP_REQUEST_METHOD]).upper()
        tool = _tool_name(span, attrs) or f"{http_method} {attrs.get(sc.URL_PATH, '')}".strip()
        raw = attrs.get(sc.REQUEST_BODY)
        status = attrs.get(sc.HTTP_RESPONSE_STATUS_CODE)
        is_error = attrs.get(sc.ERROR_TYPE) is not None or (
            isinstance(status, int) and status >= 400
        )
    else:
        return None
    if tool is None:
        return None
    if raw is None or raw == "":
        arguments: dict[str, Any] | None = {}
        error = None
    else:
        parsed = parse_json_text(raw, truncated=truncated)
        error = parsed.error
        if error is None and not isinstance(parsed.value, dict):
            # Plain HTTP bodies may be any JSON value; expose them under one key.
            arguments = {"body": parsed.value}
        else:
            arguments = parsed.value if error is None else None
    annotations = parse_json_text(attrs.get(sc.TOOL_ANNOTATIONS)).value
    result = parse_json_text(attrs.get(sc.GEN_AI_TOOL_CALL_RESULT), truncated=truncated).value
    error_type = attrs.get(sc.ERROR_TYPE)
    blocked_rule = attrs.get(sc.BLOCKED_RULE)
    checked = parse_json_text(attrs.get(sc.SAFETY_CHECKED)).value
    rounds = attrs.get(sc.MRTR_ROUNDS)
    answers = parse_json_text(attrs.get(sc.MRTR_ANSWERS)).value if rounds else None
    return ToolCall(
        span_id=str(span.get("span_id", "")),
        tool=tool,
        upstream=attrs.get(sc.UPSTREAM),
        arguments=arguments,
        arguments_error=error,
        raw_arguments=raw if isinstance(raw, str) else None,
        is_error=is_error,
        error_type=str(error_type) if error_type is not None else None,
        blocked_rule=str(blocked_rule) if blocked_rule is not None else None,
        annotations=annotations if isinstance(annotations, dict) else None,
        start_ns=_start(span),
        end_ns=int(span.get("end_time_unix_nano") or _start(span)),
        result=result if isinstance(result, dict) else None,
        checked=checked if isinstance(checked, dict) else None,
        rounds=rounds if isinstance(rounds, int) and rounds > 0 else 1,
        answers=answers if isinstance(answers, list) else None,
    )


def agent_calls(spans: Iterable[Span]) -> list[ToolCall]:
    """Tool calls made by the agent (role `agent`, observed by tracecard), by start time."""
    calls = [call for span in spans if (call := _as_call(span)) is not None]
    return sorted(calls, key=lambda c: c.start_ns)


def reported_calls(spans: Iterable[Span]) -> list[ToolCall]:
    """Tool calls only the agent's own spans claim (`tracecard.evidence = agent_reported`)."""
    calls = [call for span in spans if (call := _as_call(span, reported=True)) is not None]
    return sorted(calls, key=lambda c: c.start_ns)


def tool_annotations(spans: Iterable[Span]) -> dict[tuple[str | None, str], dict[str, Any]]:
    """Tool annotations announced by `tools/list` results in the trace, by (upstream, tool)."""
    found: dict[tuple[str | None, str], dict[str, Any]] = {}
    for span in sorted(spans, key=_start):
        attrs = _attrs(span)
        if attrs.get(sc.MCP_METHOD_NAME) != TOOLS_LIST or reported_only(attrs):
            continue
        listed = parse_json_text(attrs.get(sc.RPC_RESULT)).value
        tools = listed.get("tools") if isinstance(listed, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                notes = tool.get("annotations")
                if isinstance(notes, dict):
                    found[(attrs.get(sc.UPSTREAM), tool["name"])] = notes
    return found


def probe_observations(
    spans: Iterable[Span], turn: int | None = None
) -> dict[str, ProbeObservation]:
    """The latest verifier span per probe id (re-probing supersedes older observations), of the
    given turn's boundary (`turn=None`: the probes run when the run finished)."""
    found: dict[str, ProbeObservation] = {}
    for span in sorted(spans, key=_start):
        attrs = _attrs(span)
        probe_id = attrs.get(sc.PROBE_ID)
        if attrs.get(sc.ROLE) != sc.ROLE_VERIFIER or not isinstance(probe_id, str):
            continue
        if attrs.get(sc.TURN_INDEX) != turn:
            continue
        error = attrs.get(sc.PROBE_ERROR)
        value: Any = None
        if error is None:
            parsed = parse_json_text(attrs.get(sc.PROBE_VALUE))
            if parsed.error is not None and parsed.error != "missing":
                error = f"probe value unreadable: {parsed.error}"
            value = parsed.value
        found[probe_id] = ProbeObservation(
            probe_id=probe_id,
            span_id=str(span.get("span_id", "")),
            kind=attrs.get(sc.PROBE_KIND),
            value=value,
            error=str(error) if error is not None else None,
        )
    return found
