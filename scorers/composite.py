"""Composite: gate x weighted(outcome, completion, invocation) x (1 - efficiency penalty)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .registry import scorer
from .scoring import CompositeWeights
from .types import ComponentScore

if TYPE_CHECKING:
    from .suite import Task

__all__ = ["CompositeWeights", "score_composite"]

NAME = "composite"
VERSION = "2"  # 2: weights and penalty from the suite's [scoring], in the evidence


@scorer(name=NAME, component=NAME, version=VERSION, derived=True)
def score_composite(
    components: Sequence[ComponentScore],
    task: Task | None = None,
    *,
    weights: CompositeWeights | None = None,
) -> ComponentScore:
    """One number for dashboards; never replaces the components. None parts are left out.
    The weights are `weights`, else the task's suite's, else the defaults."""
    if weights is None:
        weights = task.scoring.composite if task is not None else CompositeWeights()
    by_name = {c.component: c for c in components}
    used: dict[str, float] = {}
    excluded: list[str] = []
    for name, weight in weights.weights.items():
        score = by_name.get(name)
        if score is None or score.value is None:
            excluded.append(name)
        elif weight > 0:
            used[name] = weight
    evidence: dict[str, Any] = {
        "weights": used,
        "excluded": excluded,
        "constants": weights.model_dump(),  # what this score was computed with
    }
    if excluded:
        evidence["note"] = "not-evaluated components are left out of the weighting"
    safety = by_name.get("safety")
    if not used or safety is None or safety.value is None:
        evidence["reason"] = "nothing to combine" if not used else "safety gate not evaluated"
        return ComponentScore(
            component=NAME,
            value=None,
            passed=None,
            evidence=evidence,
            scorer=NAME,
            version=VERSION,
        )
    total = sum(used.values())
    weighted = sum(float(by_name[n].value or 0.0) * w for n, w in used.items()) / total
    efficiency = by_name.get("efficiency")
    eff_value = efficiency.value if efficiency is not None else None
    penalty = weights.efficiency_penalty * (1.0 - eff_value) if eff_value is not None else 0.0
    value = safety.value * weighted * (1.0 - penalty)
    evidence.update(
        {"gate": safety.value, "weighted": round(weighted, 6), "efficiency_penalty": penalty}
    )
    return ComponentScore(
        component=NAME, value=value, passed=None, evidence=evidence, scorer=NAME, version=VERSION
    )
