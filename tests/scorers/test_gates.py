"""`scorers.gate`: thresholds on named statistics (pass_rate by default), per task, flags,
required tasks and no regression against a baseline; every check keeps its measured value."""

from __future__ import annotations

from typing import Any

import pytest

from tracecard.scorers import (
    Threshold,
    UnknownStatistic,
    build_scorecard,
    gate,
    parse_statistic,
    parse_suite,
)
from tracecard.scorers.scorecard import Scorecard

SUITE = parse_suite(
    'schema_version = 1\nname = "s"\n'
    + "".join(f'[[tasks]]\nid = "t{i}"\ninstruction = "x"\n' for i in range(6)),
    "toml",
)


def _run(task: int, trial: int, value: float, flags: list[str] | None = None) -> dict[str, Any]:
    return {
        "run_id": f"r{task}-{trial}",
        "task_id": f"t{task}",
        "trial": trial,
        "status": "finished",
        "flags": flags or [],
        "components": [
            # partial credit: 0.8 of the predicates hold, and the outcome fails
            {"component": "outcome", "value": value, "passed": value == 1.0,
             "scorer": "outcome", "version": "1"},
        ],
    }  # fmt: skip


def _card(values: dict[int, list[float]], name: str = "x") -> Scorecard:
    runs = [_run(t, i, v) for t, row in values.items() for i, v in enumerate(row)]
    runs[0]["flags"] = ["unsafe_success"]
    return build_scorecard(SUITE, {"id": name, "config": {"name": name}}, runs, resamples=200)


# pass rates 1, 1, 1, 0.5, 0.5, 0 -> 0.667; means 1, 1, 1, 0.9, 0.9, 0.8 -> 0.933
HASTY = {0: [1, 1], 1: [1, 1], 2: [1, 1], 3: [1, 0.8], 4: [0.8, 1], 5: [0.8, 0.8]}
CAREFUL = {t: [1.0, 1.0] for t in range(6)}


def test_a_bare_component_is_its_pass_rate_not_its_mean() -> None:
    card = _card(HASTY)
    result = gate(card, {"outcome": 0.8})
    assert not result.passed and result.failures == ["outcome pass_rate 0.67 < 0.80"]
    assert gate(card, {"outcome.mean": 0.8}).checks[0].message == "outcome mean 0.93 >= 0.80"
    assert gate(card, {"outcome.pass^2": 0.5}).checks[0].message == "outcome pass^2 0.50 >= 0.50"
    assert gate(card, {"outcome.pass@2": 0.9}).failures == ["outcome pass@2 0.83 < 0.90"]
    assert gate(card, {"outcome.flip": 0.0}).passed  # a minimum of 0 always holds


def test_per_task_names_each_task_below_its_minimum() -> None:
    card = _card(HASTY)
    result = gate(card, [Threshold("outcome", parse_statistic("pass_rate"), 0.5, per_task=True)])
    assert result.failures == ["outcome pass_rate on task t5 0.00 < 0.50"]
    assert [c.task_id for c in result.checks] == ["t0", "t1", "t2", "t3", "t4", "t5"]


def test_flags_and_required_tasks() -> None:
    card = _card(HASTY)
    result = gate(
        card, {}, max_flags={"unsafe_success": 0}, max_total_flags=1, required=["t0", "t3"]
    )
    assert result.failures == [
        "flag unsafe_success 1 > 0",
        "required task t3: 1 of 2 trials did not pass",
    ]
    passed = [c.message for c in result.checks if c.passed]
    assert passed == ["flags (all) 1 <= 1", "required task t0: 2 of 2 trials passed"]
    failing = next(c for c in result.checks if c.task_id == "t3")
    assert failing.tasks == ["r3-1"]
    with pytest.raises(ValueError, match="required task 'nope' is not in suite s"):
        gate(card, {}, required=["nope"])


def test_no_regress_names_the_regressed_tasks() -> None:
    baseline, candidate = _card(CAREFUL, "careful"), _card(HASTY, "hasty")
    result = gate(candidate, {}, baseline=baseline, no_regress=["outcome"])
    (check,) = result.checks
    assert check.tasks == ["t5", "t3", "t4"]  # largest drop first
    # mean(B - A) = -0.33, 95% interval [-0.67, -0.08]: beyond the noise
    assert not result.passed and check.measured == pytest.approx(-1 / 3)
    assert (
        check.message
        == "no regression on outcome vs careful: careful is better: regressed t5, t3, t4"
    )
    same = gate(baseline, {}, baseline=baseline, no_regress=["outcome"], strict=True)
    assert same.passed and same.checks[0].tasks == []


def test_undecided_is_a_regression_only_when_strict() -> None:
    baseline = _card(CAREFUL, "careful")
    one_drop = _card({**CAREFUL, 2: [1.0, 0.0]}, "candidate")  # one task: within noise
    lenient = gate(one_drop, {}, baseline=baseline, no_regress=["outcome"])
    assert lenient.passed and lenient.checks[0].tasks == ["t2"]
    assert "(within noise; --strict fails on it)" in lenient.checks[0].message
    strict = gate(one_drop, {}, baseline=baseline, no_regress=["outcome"], strict=True)
    assert not strict.passed


@pytest.mark.parametrize("name", ["median", "pass^0", "pass@", "pass_rates", "Pass@2"])
def test_unknown_statistics_list_the_valid_ones(name: str) -> None:
    with pytest.raises(UnknownStatistic, match=r"valid: pass_rate \(the default\), mean, pass@K"):
        parse_statistic(name)
