"""Turns of a multi-turn run, read from its trace: which turns were handed out, and which
agent calls belong to which turn (the calls made while that turn was the latest one)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracecard.traces import semconv as sc

from .calls import ToolCall, agent_calls, reported_only
from .types import Span

__all__ = ["TurnSpan", "calls_by_turn", "turn_at", "turn_spans"]


@dataclass(frozen=True)
class TurnSpan:
    """A turn boundary tracecard recorded: the turn's index, span id and start time."""

    index: int
    span_id: str
    start_ns: int


def turn_spans(spans: Iterable[Span]) -> dict[int, TurnSpan]:
    """The turn spans of a run by index (only the server writes them: role-less, no probe)."""
    found: dict[int, TurnSpan] = {}
    for span in spans:
        attrs = span.get("attributes")
        if not isinstance(attrs, dict) or sc.ROLE in attrs or sc.PROBE_ID in attrs:
            continue
        if reported_only(attrs):  # an agent's OTLP span dressed as a turn boundary
            continue
        index = attrs.get(sc.TURN_INDEX)
        name = str(span.get("name") or "")
        if isinstance(index, int) and not isinstance(index, bool) and name.startswith("turn "):
            start = int(span.get("start_time_unix_nano") or 0)
            known = found.get(index)
            if known is None or start < known.start_ns:
                found[index] = TurnSpan(index, str(span.get("span_id", "")), start)
    return found


def calls_by_turn(spans: list[Span], n_turns: int) -> dict[int, list[ToolCall]]:
    """Agent calls per turn index: a call belongs to the latest turn started before it; calls
    made before the first turn count in turn 0 (nothing the agent does goes unscored)."""
    turns = sorted(turn_spans(spans).values(), key=lambda t: t.start_ns)
    grouped: dict[int, list[ToolCall]] = {i: [] for i in range(n_turns)}
    for call in agent_calls(spans):
        grouped.setdefault(turn_at(call.start_ns, turns), []).append(call)
    return grouped


def turn_at(start_ns: int, turns: list[TurnSpan]) -> int:
    """The index of the latest of `turns` (sorted by start) started by `start_ns`; 0 before all."""
    owner = 0
    for turn in turns:
        if turn.start_ns <= start_ns:
            owner = turn.index
    return owner
