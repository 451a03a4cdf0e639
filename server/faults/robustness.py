"""An experiment's robustness under a fault plan: per fault kind and per task, how often the
agent recovered, read from the stored spans and scores (pure reading, no I/O but the store)."""

from __future__ import annotations

from typing import Any

from tracecard.scorers.environment import fault_outcomes
from tracecard.server.runs.service import RunError
from tracecard.traces import queries
from tracecard.traces.store import Store


def robustness(store: Store, experiment_id: str) -> dict[str, Any]:
    """`{experiment_id, kinds: [...], tasks: [...], lines: [...]}` (docs/replay.md)."""
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise RunError(f"no experiment {experiment_id!r}", 404)
    runs = [r for r in queries.experiment_runs(store, experiment_id) if r.task_id]
    spans = store.spans_for_runs(runs)
    scores = store.scores_for_runs([r.id for r in runs])
    kinds: dict[str, dict[str, Any]] = {}
    tasks: dict[str, dict[str, Any]] = {}
    for run in runs:
        outcomes = fault_outcomes(spans.get(run.id, []))
        outcome = next((s for s in scores.get(run.id, []) if s.component == "outcome"), None)
        task = tasks.setdefault(
            str(run.task_id),
            {
                "task_id": run.task_id,
                "runs": 0,
                "faulted_runs": 0,
                "recovered_runs": 0,
                "faulted_outcome_passed": 0,
            },
        )
        task["runs"] += 1
        if not outcomes:
            continue
        task["faulted_runs"] += 1
        task["recovered_runs"] += all(o["recovered"] for o in outcomes)
        task["faulted_outcome_passed"] += bool(outcome is not None and outcome.passed)
        for kind in {o["kind"] for o in outcomes}:
            mine = [o for o in outcomes if o["kind"] == kind]
            entry = kinds.setdefault(
                kind,
                {
                    "kind": kind,
                    "faulted_calls": 0,
                    "recovered_calls": 0,
                    "runs": 0,
                    "recovered_runs": 0,
                },
            )
            entry["faulted_calls"] += len(mine)
            entry["recovered_calls"] += sum(o["recovered"] for o in mine)
            entry["runs"] += 1
            entry["recovered_runs"] += all(o["recovered"] for o in mine)
    ordered = sorted(kinds.values(), key=lambda k: k["kind"])
    lines = [
        f"after {k['kind']} the agent recovered in {k['recovered_runs']}/{k['runs']} trials "
        f"({k['recovered_calls']}/{k['faulted_calls']} faulted calls)"
        for k in ordered
    ]
    return {
        "experiment_id": experiment_id,
        "faults": (experiment.environment or {}).get("faults"),
        "kinds": ordered,
        "tasks": sorted(tasks.values(), key=lambda t: str(t["task_id"])),
        "lines": lines,
    }
