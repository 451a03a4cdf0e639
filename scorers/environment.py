"""Flags about the environment a run ran in, read from its spans (replay, faults).

`replay_diverged`: a replayed run sent a request its source run had not recorded (answered with
an error, or forwarded live): its scores are not a pure replay of the source's environment.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracecard.traces import semconv as sc

from .types import Span

__all__ = ["REPLAY_DIVERGED", "environment_flags"]

REPLAY_DIVERGED = "replay_diverged"
_DIVERGED = frozenset({sc.REPLAY_MISS, sc.REPLAY_LIVE})


def environment_flags(spans: Sequence[Span]) -> list[str]:
    """`replay_diverged` when any span's answer was not the recording's."""
    for span in spans:
        if (span.get("attributes") or {}).get(sc.REPLAY) in _DIVERGED:
            return [REPLAY_DIVERGED]
    return []
