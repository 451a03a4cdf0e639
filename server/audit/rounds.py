"""`tracecard run --trials auto --baseline EXP`: trials added in rounds (one per task per round)
until the paired comparison with the baseline is decided by the sequential test of
`scorers.sequential`, or `--max-trials` rounds have run (docs/scorecards.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tracecard._requests import _json_call
from tracecard.client import ExperimentHandle, RunHandle, TracecardClient
from tracecard.scorers.sequential import Look, sequential_look

__all__ = ["add_round", "run_until_decided"]


def add_round(client: TracecardClient, experiment: ExperimentHandle, trial: int) -> list[RunHandle]:
    """One more run per task of the experiment, numbered `trial` (`POST /api/runs` with the
    experiment: same suite version and configuration)."""
    first: dict[str, RunHandle] = {}
    for run in experiment.runs:
        first.setdefault(run.task_id, run)
    added = []
    for task_id, model in first.items():
        body = {"experiment_id": experiment.id, "task_id": task_id, "trial": trial}
        view: dict[str, Any] = client._do(_json_call("POST", "/api/runs", json=body))
        added.append(
            RunHandle(
                id=view["id"],
                task_id=task_id,
                trial=trial,
                instruction=model.instruction,
                urls=dict(view["urls"]),
                models=dict(view.get("models") or {}),
                traceparent=f"00-{view['trace_id']}-{view['root_span_id']}-01",
            )
        )
    return added


def run_until_decided(
    client: TracecardClient,
    experiment: ExperimentHandle,
    run_round: Callable[[ExperimentHandle], bool],
    *,
    baseline: str,
    component: str,
    max_trials: int,
    report: Callable[[str], None],
    alpha: float = 0.05,
) -> tuple[Look, int]:
    """Run the experiment's first round, then one more trial per task per round, until the
    sequential test decides or `max_trials` rounds have run; `run_round` runs the given runs
    and returns False when interrupted. Returns the last look and the rounds run."""
    look: Look | None = None
    current = experiment
    for round_index in range(1, max_trials + 1):
        if round_index > 1:
            current = dataclasses.replace(
                experiment, runs=add_round(client, experiment, round_index - 1)
            )
        if not run_round(current):
            break
        view = client.compare(baseline, experiment.id, component)
        differences = [t["difference"] for t in view["tasks"] if t["difference"] is not None]
        look = sequential_look(differences, round_index, max_trials, alpha=alpha)
        report(
            f"round {round_index} of at most {max_trials}: {look.verdict} "
            f"({look.reason}; this look's level {look.level:.4f})"
        )
        if look.verdict != "undecided":
            return look, round_index
    if look is None:  # interrupted in the first round
        look = sequential_look([], 1, max_trials, alpha=alpha)
    return look, look.look
