"""Attempts the infrastructure lost (a worker that died, a sandbox that could not be made, a
per-run upstream that never started): never scored as the agent's, counted apart in the
scorecard (`Scorecard.infra`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from .scorecard import RunRecord

__all__ = ["Infrastructure", "infrastructure", "later_attempts"]


class Infrastructure(BaseModel):
    """What the infrastructure lost in an experiment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempts: dict[str, int]  # end reason -> attempts lost to it
    # cells (`task_id#trial`) with no attempt left to score: their latest attempt was lost, so
    # they are missing from the statistics until resumed or rerun
    cells: list[str]


def infrastructure(
    lost: Iterable[tuple[str, int, str]], scored: Iterable[tuple[str, int]]
) -> Infrastructure | None:
    """From the lost attempts (task, trial, end reason) and the cells that have a scored run;
    None when nothing was lost."""
    lost = list(lost)
    if not lost:
        return None
    have = set(scored)
    missing = sorted({(task, trial) for task, trial, _ in lost} - have)
    return Infrastructure(
        attempts=dict(sorted(Counter(reason for _, _, reason in lost).items())),
        cells=[f"{task}#{trial}" for task, trial in missing],
    )


def later_attempts(runs: Iterable[RunRecord]) -> list[RunRecord]:
    """The scored runs that are a later attempt at their cell than the first (the jobs ran the
    cell again: each cell's latest completed attempt is the one scored)."""
    return [r for r in runs if r.attempt is not None and r.attempt > 1]
