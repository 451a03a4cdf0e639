"""The model side of a trace page: tokens and latency on model spans, "asked by the model" on
the tool spans that ran a requested call, and the run's conversation as a readable transcript.

Built from the run's full spans (the outline has no payloads), only when the trace has model
spans. Everything here is plain text for the templates, which escape it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import orjson

from tracecard.scorers.calls import agent_calls
from tracecard.scorers.model import (
    CallLink,
    ModelTurn,
    ModelUsage,
    link_calls,
    model_turns,
    requested_links,
)
from tracecard.viewer.trace_view import SpanLine

MAX_TEXT: Final = 4000  # characters of one transcript entry shown (the span detail has all)
MODEL_SPAN_PREFIX: Final = "chat "


@dataclass(frozen=True)
class TranscriptEntry:
    """One message part in reading order: who said it, what kind, the text, its span."""

    role: str  # system | user | assistant | tool
    kind: str  # text | tool_call | tool_result | refusal | reasoning | other
    text: str
    span_id: str  # the model span whose request or answer holds it
    label: str = ""  # a tool call's or result's name, as recorded
    call_id: str = ""  # a tool call's or result's id, as recorded (never case-folded)
    at_ns: int = 0  # where it sits in time: a request's messages at its start, answers at its end
    cut: str = ""  # why the text is incomplete (a stream that broke off, a length limit)


@dataclass
class ModelView:
    """What the trace page adds for a run with model spans."""

    turns: list[ModelTurn]
    transcript: list[TranscriptEntry] = field(default_factory=list)
    requested_by: dict[str, str] = field(default_factory=dict)  # tool span -> model span
    executed: dict[str, str] = field(default_factory=dict)  # requested call id -> tool span

    @property
    def usage(self) -> ModelUsage:
        """Answered turns apart from failed requests; tokens None when none were reported."""
        return ModelUsage.of(self.turns)


def has_model_spans(outline: Sequence[dict[str, Any]]) -> bool:
    """Whether a trace outline (names only) holds any model span."""
    return any(str(s.get("name") or "").startswith(MODEL_SPAN_PREFIX) for s in outline)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}… ({len(text)} characters)"


def _entries(message: dict[str, Any], span_id: str, at_ns: int) -> list[TranscriptEntry]:
    role = str(message.get("role") or "user")
    found = []
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = str(part.get("type") or "other")
        call_id = str(part.get("id") or "")
        if kind == "tool_call":
            text = _text(part.get("arguments"))
            found.append(
                TranscriptEntry(role, kind, text, span_id, str(part.get("name")), call_id, at_ns)
            )
        elif kind == "tool_call_response":
            text = _text(part.get("response"))
            found.append(TranscriptEntry(role, "tool_result", text, span_id, "", call_id, at_ns))
        elif kind in ("text", "refusal", "reasoning"):
            text = _text(part.get("content") or "")
            found.append(TranscriptEntry(role, kind, text, span_id, at_ns=at_ns))
        else:
            found.append(TranscriptEntry(role, "other", f"[{kind}]", span_id, at_ns=at_ns))
    return found


def _answer(turn: ModelTurn) -> list[TranscriptEntry]:
    """The model's answer: its messages, text marked as cut when the stream broke off or hit
    the length limit, and a failed request as an error entry (never as an empty answer)."""
    entries = [e for m in turn.output_messages for e in _entries(m, turn.span_id, turn.end_ns)]
    cut = ""
    if turn.error_type is not None:
        cut = f"cut off: the request failed ({turn.error_type})"
    elif "length" in turn.finish_reasons:
        cut = "cut off: the model hit its length limit"
    if cut:
        entries = [replace(e, cut=cut) if e.kind == "text" else e for e in entries]
    if turn.error_type is not None:
        text = f"the model request failed: {turn.error_type}" + ("" if entries else " (no answer)")
        entries.append(
            TranscriptEntry("error", "model_error", text, turn.span_id, at_ns=turn.end_ns)
        )
    return entries


def _key(message: dict[str, Any]) -> bytes:
    """A message as history compares it: its role and parts (an answer's finish reason is not
    repeated when the agent sends the answer back)."""
    kept = {"role": message.get("role"), "parts": message.get("parts")}
    return orjson.dumps(kept, option=orjson.OPT_SORT_KEYS, default=str)


def transcript(turns: Sequence[ModelTurn]) -> list[TranscriptEntry]:
    """The conversation in order: each request's new messages, then the model's answer.

    A request that repeats the conversation so far (the usual stateless chat API) adds only
    what is new; one that does not (a new conversation) is shown whole."""
    entries: list[TranscriptEntry] = []
    history: list[bytes] = []
    for turn in turns:
        inputs = turn.input_messages
        keys = [_key(m) for m in inputs]
        start = len(history) if keys[: len(history)] == history else 0
        for message in inputs[start:]:
            entries.extend(_entries(message, turn.span_id, turn.start_ns))
        history = keys + [_key(m) for m in turn.output_messages]
        entries.extend(_answer(turn))
    return entries


def call_links(turns: Sequence[ModelTurn], spans: Sequence[dict[str, Any]]) -> list[CallLink]:
    """Which tool span executed which requested call: the one place the page finds the
    model -> tool link, read from the links the proxy recorded on the tool spans
    (docs/llm.md#links); nothing is matched again here."""
    recorded = requested_links(spans)
    return link_calls(turns, [c for c in agent_calls(spans) if c.span_id in recorded], recorded)


def build_model_view(spans: Sequence[dict[str, Any]]) -> ModelView | None:
    """The model view of a run's full spans; None when it has no model span."""
    turns = model_turns(spans)
    if not turns:
        return None
    links = call_links(turns, spans)
    return ModelView(
        turns=turns,
        transcript=transcript(turns),
        requested_by={link.tool_span_id: link.model_span_id for link in links},
        executed={link.call_id: link.tool_span_id for link in links if link.call_id},
    )


def annotate_lines(lines: Sequence[SpanLine], view: ModelView) -> None:
    """Put tokens and time to first token on model rows, the requesting turn on tool rows."""
    by_id = {turn.span_id: turn for turn in view.turns}
    for line in lines:
        turn = by_id.get(line.span_id)
        if turn is not None:
            line.model_chip = _chip(turn)
        requester = view.requested_by.get(line.span_id)
        if requester is not None:
            line.requested_by = requester


def _chip(turn: ModelTurn) -> str:
    """A model row's chip: its tokens as reported, or that the request failed."""
    if turn.failed:
        return "usage unknown"  # the row already shows the error; its tokens are unknown
    if turn.input_tokens is None and turn.output_tokens is None:
        return "usage not reported"
    given = ["?" if n is None else str(n) for n in (turn.input_tokens, turn.output_tokens)]
    return f"{given[0]}→{given[1]} tok"
