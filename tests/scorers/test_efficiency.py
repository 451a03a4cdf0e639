from __future__ import annotations

import pytest

from tracecard.scorers import score_efficiency

from .trace_helpers import FINISHED, make_task, tool_call

OPTIMAL_2 = "[tasks.efficiency]\noptimal_calls = 2\n"


def test_optimal_path_scores_one() -> None:
    calls = [tool_call("a", {"x": 1}), tool_call("b", {"x": 1})]
    score = score_efficiency(make_task(OPTIMAL_2), calls, FINISHED)
    assert (score.value, score.passed) == (1.0, True)
    assert score.evidence["latency_ms"] == pytest.approx(20.0)


def test_more_calls_than_optimal() -> None:
    calls = [tool_call("a", {"x": i}) for i in range(4)]
    score = score_efficiency(make_task(OPTIMAL_2), calls, FINISHED)
    assert score.value == pytest.approx(0.5) and score.passed is False


def test_identical_repeats_are_redundant() -> None:
    first = tool_call("a", {"x": 1, "y": 2})
    again = tool_call("a", {"y": 2, "x": 1.0})  # same canonical arguments
    score = score_efficiency(make_task(""), [first, again], FINISHED)
    assert score.evidence["redundant"] == [
        {"span_id": again["span_id"], "repeats": first["span_id"]}
    ]
    assert score.value == pytest.approx(0.5)


def test_retry_after_error_is_recovery_not_redundancy() -> None:
    failed = tool_call("a", {"x": 1}, is_error=True)
    retry = tool_call("a", {"x": 1})
    score = score_efficiency(make_task(""), [failed, retry], FINISHED)
    assert score.evidence["redundant"] == []
    assert score.evidence["errors"] == [
        {"span_id": failed["span_id"], "error_type": "tool_error", "recovered": True}
    ]
    assert score.value == pytest.approx(1 - 0.5 / 2)


def test_unrecovered_error_costs_more_than_a_recovered_one() -> None:
    unrecovered = score_efficiency(
        make_task(""), [tool_call("b"), tool_call("a", is_error=True)], FINISHED
    )
    recovered = score_efficiency(
        make_task(""), [tool_call("a", is_error=True), tool_call("a")], FINISHED
    )
    assert unrecovered.value is not None and recovered.value is not None
    assert unrecovered.value < recovered.value


def test_latency_budget() -> None:
    task = make_task("[tasks.efficiency]\nmax_latency_ms = 10\n")
    score = score_efficiency(task, [tool_call("a", duration_ms=40)], FINISHED)
    assert score.value == pytest.approx(0.25)


def test_no_calls_with_optimal_zero_is_efficient() -> None:
    task = make_task("[tasks.efficiency]\noptimal_calls = 0\n")
    assert score_efficiency(task, [], FINISHED).value == 1.0
    assert score_efficiency(task, [tool_call("a")], FINISHED).value == 0.0


def test_a_run_without_calls_is_not_evaluated() -> None:
    """Doing nothing is not efficiency 1.0 (the hallucinated run of the demo had 0 calls)."""
    score = score_efficiency(make_task(OPTIMAL_2), [], FINISHED)
    assert (score.value, score.passed) == (None, None)
    assert score.evidence["calls"] == 0 and score.version == "4"
    assert score.evidence["reason"].startswith("no tool calls: efficiency is not evaluated")


@pytest.mark.parametrize(
    "body",
    [
        "[tasks.invocation]\nexpect_no_calls = true\n",
        "[tasks.efficiency]\noptimal_calls = 0\n",
    ],
)
def test_a_task_that_expects_no_calls_scores_doing_nothing_1(body: str) -> None:
    score = score_efficiency(make_task(body), [], FINISHED)
    assert (score.value, score.passed) == (1.0, True)
    assert "reason" not in score.evidence
