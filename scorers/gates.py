"""CI gates on a scorecard: thresholds on named statistics, flag limits, required tasks and no
regression against a baseline. Every check is kept with its measured value, passed or not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .compare import Comparison, compare_experiments
from .flags import (
    HALLUCINATED_COMPLETION,
    LUCKY_OUTCOME,
    MODEL_CALL_NOT_EXECUTED,
    TOOL_RESULT_UNREAD,
    UNSAFE_SUCCESS,
)
from .scorecard import Scorecard
from .statistics import HEADLINE, StatisticName, parse_statistic

__all__ = [
    "KNOWN_FLAGS",
    "Check",
    "GateResult",
    "Threshold",
    "gate",
    "parse_threshold_name",
]

KNOWN_FLAGS = (
    HALLUCINATED_COMPLETION,
    UNSAFE_SUCCESS,
    LUCKY_OUTCOME,
    MODEL_CALL_NOT_EXECUTED,
    TOOL_RESULT_UNREAD,
)


@dataclass(frozen=True)
class Threshold:
    """`component.statistic >= minimum` (on the experiment, or on every task with `per_task`)."""

    component: str
    statistic: StatisticName
    minimum: float
    per_task: bool = False

    def __str__(self) -> str:
        where = " on every task" if self.per_task else ""
        return f"{self.component} {self.statistic} >= {self.minimum:.2f}{where}"


def parse_threshold_name(text: str) -> tuple[str, StatisticName]:
    """`outcome` (its pass_rate), `outcome.mean`, `outcome.pass^5`: (component, statistic)."""
    component, _, statistic = text.strip().partition(".")
    return component, parse_statistic(statistic or HEADLINE)


@dataclass(frozen=True)
class Check:
    """One gate check as measured: what was required, the value found, and the verdict."""

    kind: Literal["threshold", "flag", "required", "no_regress"]
    name: str  # e.g. "outcome pass_rate >= 0.80", "unsafe_success <= 0", "task close-vpn"
    measured: float | None
    limit: float | None
    passed: bool
    message: str  # e.g. "outcome pass_rate 0.73 < 0.80"
    task_id: str | None = None
    tasks: list[str] = field(default_factory=list)  # regressed tasks, failing required trials

    def as_json(self) -> dict[str, object]:
        """The check in `tracecard gate --json`."""
        return {
            "kind": self.kind,
            "name": self.name,
            "task_id": self.task_id,
            "measured": self.measured,
            "limit": self.limit,
            "passed": self.passed,
            "message": self.message,
            "tasks": self.tasks,
        }


@dataclass(frozen=True)
class GateResult:
    """Whether a scorecard meets its gate, every check with its measured value."""

    passed: bool
    failures: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)


def _threshold_checks(card: Scorecard, t: Threshold) -> list[Check]:
    label = f"{t.component} {t.statistic}"
    name = str(t)
    if not t.per_task:
        summary = card.summary(t.component)
        stat = summary.statistic(t.statistic) if summary else None
        value = stat.value if stat else None
        return [_measured("threshold", name, label, value, t.minimum)]
    checks = []
    for task in card.tasks:
        stats = task.component(t.component)
        if stats is None or (stats.evaluated == 0 and stats.mean is None):
            continue  # no expectation of this component on this task
        value = stats.statistic(t.statistic)
        checks.append(_measured("threshold", name, label, value, t.minimum, task.task_id))
    if not checks:
        checks.append(_measured("threshold", name, label, None, t.minimum))
    return checks


def _measured(
    kind: Literal["threshold"],
    name: str,
    label: str,
    value: float | None,
    minimum: float,
    task_id: str | None = None,
) -> Check:
    where = f" on task {task_id}" if task_id else ""
    if value is None:
        message = f"{label}{where}: not evaluated (threshold {minimum:.2f})"
        return Check(kind, name, None, minimum, False, message, task_id)
    ok = value >= minimum
    sign = ">=" if ok else "<"
    message = f"{label}{where} {value:.2f} {sign} {minimum:.2f}"
    return Check(kind, name, value, minimum, ok, message, task_id)


def _flag_check(card: Scorecard, flag: str | None, maximum: int) -> Check:
    count = sum(card.flags.values()) if flag is None else card.flags.get(flag, 0)
    label = "flags (all)" if flag is None else f"flag {flag}"
    ok = count <= maximum
    message = f"{label} {count} {'<=' if ok else '>'} {maximum}"
    return Check("flag", f"{label} <= {maximum}", count, maximum, ok, message)


def _required_check(card: Scorecard, task_id: str) -> Check:
    runs = [r for r in card.runs if r.task_id == task_id]
    failing = sorted(
        {r.run_id for r in runs if any(s.passed is False for s in r.components)}
        | {r.run_id for r in runs if not any(s.passed is not None for s in r.components)}
    )
    ok = bool(runs) and not failing
    if not runs:
        message = f"required task {task_id}: no runs"
    elif failing:
        message = f"required task {task_id}: {len(failing)} of {len(runs)} trials did not pass"
    else:
        message = f"required task {task_id}: {len(runs)} of {len(runs)} trials passed"
    return Check(
        "required",
        f"task {task_id} passes in every trial",
        len(runs) - len(failing),
        len(runs),
        ok,
        message,
        task_id,
        failing,
    )


def _regress_check(comparison: Comparison, strict: bool, baseline_name: str) -> Check:
    regressed = [t.task_id for t in comparison.tasks if t.cls == "regressed"]
    verdict = comparison.verdict
    worse = verdict == "A better" or (strict and verdict == "undecided" and bool(regressed))
    said = {"A better": f"{baseline_name} is better", "B better": "better than the baseline"}
    words = said.get(verdict, "undecided")
    listed = f": regressed {', '.join(regressed)}" if regressed else ": no task regressed"
    message = f"no regression on {comparison.component} vs {baseline_name}: {words}{listed}"
    if verdict == "undecided" and regressed and not strict:
        message += " (within noise; --strict fails on it)"
    return Check(
        "no_regress",
        f"{comparison.component} no regression vs {baseline_name}",
        comparison.interval.mean if comparison.interval else None,
        0.0,
        not worse,
        message,
        None,
        regressed,
    )


def gate(
    scorecard: Scorecard,
    thresholds: Mapping[str, float] | Sequence[Threshold],
    *,
    max_flags: Mapping[str, int] | None = None,
    max_total_flags: int | None = None,
    required: Sequence[str] = (),
    baseline: Scorecard | None = None,
    no_regress: Sequence[str] = (),
    strict: bool = False,
) -> GateResult:
    """Check `scorecard`. A mapping's keys are `component` (its pass_rate) or
    `component.statistic`; a statistic that is not evaluated fails. `required` tasks must pass
    every component in every trial; with a `baseline`, each `no_regress` component must not be
    worse by the paired comparison (`undecided` is no regression unless `strict`)."""
    if isinstance(thresholds, Mapping):
        parsed = [Threshold(*parse_threshold_name(k), v) for k, v in thresholds.items()]
    else:
        parsed = list(thresholds)
    checks: list[Check] = []
    for threshold in parsed:
        checks += _threshold_checks(scorecard, threshold)
    for flag, maximum in (max_flags or {}).items():
        checks.append(_flag_check(scorecard, flag, maximum))
    if max_total_flags is not None:
        checks.append(_flag_check(scorecard, None, max_total_flags))
    known = {t.task_id for t in scorecard.tasks}
    for task_id in required:
        if task_id not in known:
            raise ValueError(f"required task {task_id!r} is not in suite {scorecard.suite.name}")
        checks.append(_required_check(scorecard, task_id))
    if baseline is not None:
        name = str(baseline.experiment.config.get("name") or baseline.experiment.id)
        for component in no_regress:
            comparison = compare_experiments(baseline, scorecard, component)
            checks.append(_regress_check(comparison, strict, name))
    failures = [c.message for c in checks if not c.passed]
    return GateResult(passed=not failures, failures=failures, checks=checks)
