"""Trials until decided, for the command line: the estimate `tracecard compare` adds to an
undecided verdict, and the rounds of `tracecard run --trials auto` (docs/scorecards.md)."""

from __future__ import annotations

from typing import Any

from tracecard.scorers.sequential import estimate_trials
from tracecard.traces import queries
from tracecard.traces.store import Store

__all__ = ["trials_line", "with_trials_needed"]


def with_trials_needed(view: dict[str, Any], store: Store, a: str, b: str) -> dict[str, Any]:
    """The comparison view plus `trials_needed` when its verdict is undecided: the estimate of
    `scorers.sequential.estimate_trials` on the paired tasks' pass rates, each experiment's
    trials per task as k (one read of each experiment's row; no scorecard is built again)."""
    if view.get("verdict") != "undecided":
        return view
    rows = [queries.get_experiment(store, e) for e in (a, b)]
    if any(row is None for row in rows):
        return view
    k_a, k_b = (int(row.trials) for row in rows if row is not None)
    pairs = [
        (float(t["a"]), k_a, float(t["b"]), k_b)
        for t in view.get("tasks", [])
        if t.get("a") is not None and t.get("b") is not None
    ]
    estimate = estimate_trials(pairs)
    if estimate is None:
        return view
    needed = {
        "effect": round(estimate.effect, 6),
        "tasks": estimate.tasks,
        "trials_now": estimate.trials_now,
        "trials_needed": estimate.trials_needed,
        "additional": estimate.additional,
        "between_variance": round(estimate.between_variance, 6),
        "trial_variance": round(estimate.trial_variance, 6),
        "confidence": 0.95,
        "power": 0.8,
        "reason": estimate.reason,
    }
    return {**view, "trials_needed": needed}


def trials_line(view: dict[str, Any]) -> str | None:
    """One line for the terminal: how many more trials would decide, or why none would."""
    needed = view.get("trials_needed")
    if not needed:
        return None
    return f"trials to decide: {needed['reason']}"
