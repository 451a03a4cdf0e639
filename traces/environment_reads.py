"""What an experiment's robustness section is read from (docs/replay.md, "Robustness"): its
runs, their spans and whether each run's outcome passed, and the experiment it is paired with
for "with faults vs without". Store reads only; the section itself is computed by the pure
`tracecard.scorers.robustness` and `tracecard.scorers.fault_comparison`, for the server (API,
CLI, exports) and the viewer (the experiment page) alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import SpanDict, Store

__all__ = ["EnvironmentReading", "read_environment", "without_faults"]


@dataclass(frozen=True)
class EnvironmentReading:
    """The inputs of `scorers.robustness.robustness_of`, and the pairing (if any)."""

    environment: dict[str, Any]
    runs: list[tuple[str, str]]  # (run id, task id)
    spans: dict[str, list[SpanDict]]
    outcome_passed: dict[str, bool]
    without: ExperimentRow | None  # the experiment without faults to compare with
    chosen_by: str  # why that one


def read_environment(store: Store, experiment: ExperimentRow) -> EnvironmentReading:
    """The experiment's runs (with a task), their spans and outcome passes, and its pairing."""
    runs = [r for r in queries.experiment_runs(store, experiment.id) if r.task_id]
    scores = store.scores_for_runs([r.id for r in runs])
    passed = {
        run_id: any(s.component == "outcome" and s.passed for s in found)
        for run_id, found in scores.items()
    }
    pair = without_faults(store, experiment)
    return EnvironmentReading(
        environment=dict(experiment.environment or {}),
        runs=[(r.id, str(r.task_id)) for r in runs],
        spans=store.spans_for_runs(runs),
        outcome_passed=passed,
        without=pair[0] if pair else None,
        chosen_by=pair[1] if pair else "",
    )


def _faulted(experiment: ExperimentRow) -> bool:
    return bool((experiment.environment or {}).get("faults"))


def without_faults(store: Store, experiment: ExperimentRow) -> tuple[ExperimentRow, str] | None:
    """The experiment to pair a faulted one with, and why it: its replay source when that ran
    without faults (the same recorded world), else the nearest experiment of the same config
    name on the same suite version without faults (the latest before it, else the first after).
    Chosen from what the user created, never from anything a run sent."""
    if not _faulted(experiment):
        return None
    replay = (experiment.environment or {}).get("replay")
    if isinstance(replay, Mapping) and replay.get("source"):
        source = queries.get_experiment(store, str(replay["source"]))
        if source and source.suite_version == experiment.suite_version and not _faulted(source):
            return source, "its replay source"
    rows = queries.list_experiments(store, limit=500, suite=experiment.suite_version)
    mates = [
        row
        for row in rows
        if row.id != experiment.id
        and row.suite_version == experiment.suite_version
        and row.config_name == experiment.config_name
        and not _faulted(row)
    ]
    before = [row for row in mates if row.created_at <= experiment.created_at]
    found = before[0] if before else (mates[-1] if mates else None)  # rows: newest first
    if found is None:
        return None
    return found, f"the nearest experiment of {experiment.config_name!r} without faults"
