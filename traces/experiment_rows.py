"""An experiment's stored rows as its scorecard needs them, and which runs it leaves out:
shared by the SQLAlchemy reader (`tracecard.traces.experiments`) and the plain SQLite one
(`tracecard.traces.sqlite_read`); this module imports neither."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SuiteRow, VerdictRow

__all__ = ["INFRA_REASONS", "StoredExperiment", "superseded"]

# Why a run ended that is the infrastructure's fault, not the agent's (`runs.end_reason`): set by
# the durable jobs (tracecard.server.jobs); such a run is never scored as the agent's.
INFRA_REASONS = ("worker_lost", "sandbox_failed", "upstream_never_started")
_FINAL = ("finished", "errored", "timed_out", "aborted")


@dataclass(frozen=True)
class StoredExperiment:
    """An experiment, its suite document (None when no longer stored), its runs of a task by
    task and trial, and their scores and people's verdicts by run id."""

    experiment: ExperimentRow
    suite: SuiteRow | None
    runs: list[RunRow]
    scores: dict[str, list[ScoreRow]]
    verdicts: dict[str, list[VerdictRow]]
    # the durable jobs' attempt number of each run they began (`job_attempts`), by run id
    attempts: dict[str, int] = field(default_factory=dict)
    # attempts lost to the infrastructure (`INFRA_REASONS`): left out of `runs`, counted apart
    infra: list[RunRow] = field(default_factory=list)


def superseded(runs: list[RunRow], later: set[str] | None = None) -> set[str]:
    """Runs the scorecard leaves out: any attempt lost to the infrastructure, and, in a cell
    (task, trial) that the jobs attempted again (a run in `later`), every attempt but its latest
    completed one (a rerun replaces what it reruns). Runs made otherwise all count."""
    by_cell: dict[tuple[str | None, int], list[RunRow]] = {}
    for run in runs:
        by_cell.setdefault((run.task_id, run.trial), []).append(run)
    out: set[str] = set()
    for cell in by_cell.values():
        out.update(r.id for r in cell if r.end_reason in INFRA_REASONS)
        kept = sorted((r for r in cell if r.end_reason not in INFRA_REASONS), key=_created)
        if len(kept) > 1 and any(r.id in (later or set()) for r in kept):
            latest = ([r for r in kept if r.status in _FINAL] or kept)[-1]
            out.update(r.id for r in kept if r.id != latest.id)
    return out


def _created(run: RunRow) -> datetime:
    return run.created_at
