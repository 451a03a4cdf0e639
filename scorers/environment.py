"""Flags about the environment a run ran in, read from its spans (replay, faults).

`replay_diverged`: a replayed run sent a request its source run had not recorded (answered with
an error, or forwarded live): its scores are not a pure replay of the source's environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracecard.traces import semconv as sc

from .types import Span

__all__ = ["REPLAY_DIVERGED", "environment_flags", "fault_outcomes"]

REPLAY_DIVERGED = "replay_diverged"
_DIVERGED = frozenset({sc.REPLAY_MISS, sc.REPLAY_LIVE})


def environment_flags(spans: Sequence[Span]) -> list[str]:
    """`replay_diverged` when any span's answer was not the recording's."""
    for span in spans:
        if (span.get("attributes") or {}).get(sc.REPLAY) in _DIVERGED:
            return [REPLAY_DIVERGED]
    return []


def fault_outcomes(spans: Sequence[Span]) -> list[dict[str, Any]]:
    """Each faulted agent call (`tracecard.fault.kind`) and whether the run recovered from it:
    a later call of the same tool that succeeded (for a changed `tools/list`: any later
    successful tool call on that upstream); a delayed call that succeeded recovered itself."""
    ordered = sorted(spans, key=lambda s: s.get("start_time_unix_nano") or 0)
    found: list[dict[str, Any]] = []
    for index, span in enumerate(ordered):
        attributes = span.get("attributes") or {}
        kind = attributes.get(sc.FAULT_KIND)
        if kind is None:
            continue
        tool = _tool(span)
        upstream = attributes.get(sc.UPSTREAM)
        listing = attributes.get(sc.MCP_METHOD_NAME) == "tools/list"
        recovered = kind == "latency_ms" and _succeeded(span)
        for later in ordered[index + 1 :]:
            later_attributes = later.get("attributes") or {}
            if later_attributes.get(sc.UPSTREAM) != upstream or not _succeeded(later):
                continue
            if later_attributes.get(sc.ROLE, sc.ROLE_AGENT) != sc.ROLE_AGENT:
                continue
            if (listing and later_attributes.get(sc.MCP_METHOD_NAME) == "tools/call") or (
                not listing and _tool(later) == tool
            ):
                recovered = True
                break
        found.append(
            {
                "span_id": span.get("span_id"),
                "rule": attributes.get(sc.FAULT_RULE),
                "kind": kind,
                "tool": tool,
                "recovered": recovered,
            }
        )
    return found


def _tool(span: Span) -> str:
    attributes = span.get("attributes") or {}
    name = attributes.get(sc.GEN_AI_TOOL_NAME)
    return str(name) if name is not None else str(span.get("name") or "")


def _succeeded(span: Span) -> bool:
    attributes = span.get("attributes") or {}
    if attributes.get(sc.ERROR_TYPE) is not None or attributes.get(sc.FAULT_KIND) not in (
        None,
        "latency_ms",
    ):
        return False
    status = attributes.get(sc.HTTP_RESPONSE_STATUS_CODE)
    return not (isinstance(status, int) and status >= 400)
