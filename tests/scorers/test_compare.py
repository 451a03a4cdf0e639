from __future__ import annotations

import random

import pytest

from tracecard.scorers import ComparisonError, build_scorecard, compare_experiments, parse_suite
from tracecard.scorers.scorecard import Scorecard


def suite_text(n: int) -> str:
    tasks = "".join(f'[[tasks]]\nid = "t{i}"\ninstruction = "x"\n' for i in range(n))
    return f'schema_version = 1\nname = "s"\n{tasks}'


def card(n_tasks: int, rates: list[float], exp: str, trials: int = 4, seed: int = 0) -> Scorecard:
    suite = parse_suite(suite_text(n_tasks), "toml")
    rng = random.Random(seed)
    runs = []
    for i, rate in enumerate(rates):
        for trial in range(trials):
            passed = rng.random() < rate
            runs.append(
                {
                    "run_id": f"{exp}-{i}-{trial}",
                    "task_id": f"t{i}",
                    "trial": trial,
                    "status": "finished",
                    "components": [
                        {
                            "component": "outcome",
                            "value": float(passed),
                            "passed": passed,
                            "scorer": "outcome",
                            "version": "1",
                        }
                    ],
                }
            )
    return build_scorecard(suite, {"id": exp, "config": {}}, runs, resamples=200)


def test_classes_point_from_a_to_b() -> None:
    a = card(5, [1, 0, 1, 0, 1], "A", trials=1)
    b = card(5, [1, 0, 0, 1], "B", trials=1)  # t4 has no runs in B
    result = compare_experiments(a, b)
    # One display order for every reader: regressions first, then improvements, missing, ...
    assert [(t.task_id, t.cls) for t in result.tasks] == [
        ("t2", "regressed"),
        ("t3", "improved"),
        ("t4", "missing"),
        ("t1", "both_fail"),
        ("t0", "both_pass"),
    ]
    assert result.tasks[1].difference == 1.0  # B - A
    assert result.counts()["missing"] == 1


def test_few_tasks_with_a_small_difference_is_undecided() -> None:
    a = card(4, [1, 1, 0, 0], "A", trials=1)
    b = card(4, [1, 1, 1, 0], "B", trials=1)
    result = compare_experiments(a, b)
    assert result.verdict == "undecided"


def test_interval_containing_zero_is_undecided() -> None:
    rates = [0.5] * 30
    result = compare_experiments(card(30, rates, "A", seed=1), card(30, rates, "B", seed=2))
    assert result.interval is not None and result.interval.contains(0.0)
    assert result.verdict == "undecided"


def test_many_tasks_with_a_real_difference_decide() -> None:
    rng = random.Random(3)
    low = [rng.uniform(0.1, 0.4) for _ in range(60)]
    high = [min(1.0, r + 0.4) for r in low]
    better_b = compare_experiments(card(60, low, "A"), card(60, high, "B"))
    assert better_b.verdict == "B better" and better_b.interval.low > 0  # type: ignore[union-attr]
    better_a = compare_experiments(card(60, high, "A"), card(60, low, "B"))
    assert better_a.verdict == "A better"


def test_different_suite_versions_cannot_be_compared() -> None:
    with pytest.raises(ComparisonError, match="different suites"):
        compare_experiments(card(3, [1, 1, 1], "A"), card(4, [1, 1, 1, 1], "B"))


def test_comparison_is_reproducible() -> None:
    a, b = card(10, [0.2] * 10, "A"), card(10, [0.7] * 10, "B")
    assert compare_experiments(a, b, seed=5) == compare_experiments(a, b, seed=5)


def test_a_component_neither_side_evaluated_is_not_evaluated_not_missing() -> None:
    a = card(3, [1, 0], "A", trials=1)  # t2 has no outcome score on either side
    b = card(3, [1, 1], "B", trials=1)
    result = compare_experiments(a, b)
    assert [t.cls for t in result.tasks] == ["improved", "both_pass", "not_evaluated"]
    assert result.counts()["not_evaluated"] == 1 and result.counts()["missing"] == 0
