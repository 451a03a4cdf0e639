"""Task health across configurations: failed by all, passed by all, noise above signal."""

from __future__ import annotations

from tests.scorers.test_sequential import SUITE
from tracecard.scorers import RunRecord, build_scorecard
from tracecard.scorers.task_health import task_health
from tracecard.scorers.types import ComponentScore


def _card(experiment: str, trials: dict[str, list[bool]]):  # type: ignore[no-untyped-def]
    runs = [
        RunRecord(
            run_id=f"{experiment}-{task}-{n}",
            task_id=task,
            trial=n,
            status="finished",
            components=[
                ComponentScore(
                    component="completion", value=float(ok), passed=ok, scorer="c", version="1"
                )
            ],
        )
        for task, passes in trials.items()
        for n, ok in enumerate(passes)
    ]
    return build_scorecard(SUITE, {"id": experiment, "config": {"name": experiment}}, runs)


def test_each_kind_of_unhealthy_task_and_a_healthy_one() -> None:
    a = _card(
        "a", {"t0": [False, False], "t1": [True, True], "t2": [True, False], "t3": [True, True]}
    )
    b = _card(
        "b", {"t0": [False, False], "t1": [True, True], "t2": [False, True], "t3": [False, False]}
    )
    found = {h.task_id: h for h in task_health([a, b], "completion")}
    assert found["t0"].kind == "failed_by_all"
    assert found["t1"].kind == "passed_by_all"
    # both configurations flip (flip rate 1.0) and score the same (spread 0): noise only
    assert found["t2"].kind == "noise_above_signal" and "above the spread" in found["t2"].reason
    assert found["t3"].kind is None and found["t3"].spread == 1.0  # it separates them
    # one configuration is not enough to judge anything
    assert all(h.kind is None for h in task_health([a], "completion"))
