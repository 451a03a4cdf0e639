"""A comparison of two experiments as the API returns it and `tracecard compare` prints it
(no Litestar, so that the command needs only the store and the scorers)."""

from __future__ import annotations

from typing import Any

from tracecard.scorers import Comparison
from tracecard.scorers.drift import ToolDrift
from tracecard.traces.queries import get_experiment
from tracecard.traces.store import Store

__all__ = ["comparison_view", "config_names", "with_drift"]


def with_drift(view: dict[str, Any], drift: ToolDrift, allow: bool) -> dict[str, Any]:
    """The comparison with its tool drift; a drifted comparison has no verdict (null, with the
    reason) unless `allow` (`--allow-drift`, `allow_drift=true`): the two sides may have used
    different tools, and a difference in scores would not be the agents'."""
    view = {**view, "tool_drift": drift.as_json()}
    if drift.drifted and not allow:
        view["verdict_without_drift"] = view["verdict"]
        view["verdict"] = None
        view["reason"] = (
            f"tool definitions differ between the runs ({drift.describe()}): no verdict; "
            "rerun both on the same servers, or pass --allow-drift (allow_drift=true)"
        )
    return view


def comparison_view(result: Comparison) -> dict[str, Any]:
    """A comparison as the API returns it."""
    interval = result.interval
    return {
        "a": result.a_id,
        "b": result.b_id,
        "component": result.component,
        "verdict": result.verdict,
        "reason": result.reason,
        "interval": None
        if interval is None
        else {"mean": interval.mean, "low": interval.low, "high": interval.high, "n": interval.n},
        "counts": result.counts(),
        "tasks": [
            {
                "task_id": t.task_id,
                "a": t.a,
                "b": t.b,
                "difference": t.difference,
                "class": t.cls,
            }
            for t in result.tasks
        ],
    }


def config_names(store: Store, a: str, b: str) -> tuple[str, str]:
    """The two experiments' configuration names, as a comparison names its sides (`careful`
    vs `hasty`; with the ids' first 8 characters when both have one name)."""
    names = []
    for experiment_id in (a, b):
        row = get_experiment(store, experiment_id)
        names.append(row.config_name if row is not None else experiment_id)
    if names[0] == names[1]:
        return f"{names[0]} ({a[:8]})", f"{names[1]} ({b[:8]})"
    return names[0], names[1]
