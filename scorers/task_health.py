"""Task health across experiments (docs/audit.md, "Task health across experiments"): from the
scorecards of every configuration run on one suite version, the tasks that cannot tell
configurations apart. Pure: scorecards in, findings out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .scorecard import Scorecard

__all__ = ["HEALTH_KINDS", "TaskHealth", "task_health"]

HealthKind = Literal["failed_by_all", "passed_by_all", "noise_above_signal"]
HEALTH_KINDS: tuple[HealthKind, ...] = ("failed_by_all", "passed_by_all", "noise_above_signal")
LABELS = {
    "failed_by_all": "failed by every configuration",
    "passed_by_all": "passed by every configuration",
    "noise_above_signal": "noise above signal",
}


@dataclass(frozen=True)
class TaskHealth:
    """One task across configurations: its pass rate in each, and what that says."""

    task_id: str
    rates: dict[str, float]  # experiment id -> pass rate on the component
    flips: int  # configurations whose trials both passed and failed the task
    configs: int  # configurations that evaluated the task
    spread: float  # highest minus lowest pass rate across configurations
    kind: HealthKind | None
    reason: str


def task_health(
    cards: Sequence[Scorecard], component: str = "outcome", min_configs: int = 2
) -> list[TaskHealth]:
    """Per task (in the first scorecard's order), over the experiments that evaluated it on
    `component`: failed by every configuration (a candidate defect), passed by every one (it does
    not discriminate), or a flip rate (share of configurations whose trials disagree) above the
    spread of pass rates between configurations (ClawBench's noise-above-signal). Needs
    `min_configs` configurations that evaluated the task; otherwise no finding."""
    order: list[str] = []
    for card in cards:
        order += [t.task_id for t in card.tasks if t.task_id not in order]
    found = []
    for task_id in order:
        rates: dict[str, float] = {}
        flips = 0
        for card in cards:
            task = next((t for t in card.tasks if t.task_id == task_id), None)
            stats = task.component(component) if task else None
            if stats is None or stats.pass_rate is None:
                continue
            rates[card.experiment.id] = stats.pass_rate
            flips += stats.flip
        configs = len(rates)
        spread = max(rates.values()) - min(rates.values()) if rates else 0.0
        kind: HealthKind | None = None
        reason = ""
        if configs >= min_configs:
            flip_rate = flips / configs
            if all(r == 0.0 for r in rates.values()):
                kind = "failed_by_all"
                reason = f"every one of {configs} configurations failed it: a candidate defect"
            elif all(r == 1.0 for r in rates.values()):
                kind = "passed_by_all"
                reason = (
                    f"every one of {configs} configurations passed it: it does not discriminate"
                )
            elif flip_rate > spread:
                kind = "noise_above_signal"
                reason = (
                    f"flip rate {flip_rate:.2f} ({flips} of {configs} configurations' trials "
                    f"disagree) above the spread of pass rates between them ({spread:.2f})"
                )
        found.append(TaskHealth(task_id, rates, flips, configs, spread, kind, reason))
    return found
