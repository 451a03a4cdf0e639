from __future__ import annotations

import pytest

from tracecard.scorers import RunFacts, score_completion

from .trace_helpers import make_task

SPEC = """
[tasks.completion]
require_finished = true
checks = [{ contains = "42" }, { regex = "answer" }]
"""


def test_finished_with_passing_checks_passes() -> None:
    score = score_completion(make_task(SPEC), [], RunFacts("finished", "the answer is 42"))
    assert (score.value, score.passed) == (1.0, True)
    contains = score.evidence["checks"][0]
    assert contains["check"] == "contains" and contains["note"] == "substring match"


def test_value_is_the_fraction_of_checks_that_hold() -> None:
    score = score_completion(make_task(SPEC), [], RunFacts("finished", "42"))
    assert score.value == 0.5 and score.passed is False
    assert score.evidence["checks"][1]["reason"].startswith("answer does not match")


@pytest.mark.parametrize("status", ["timed_out", "aborted", "errored"])
def test_a_run_that_did_not_end_on_its_own_scores_zero(status: str) -> None:
    score = score_completion(make_task(SPEC), [], RunFacts(status, "the answer is 42"))  # type: ignore[arg-type]
    assert (score.value, score.passed) == (0.0, False)
    assert status in score.evidence["reason"]


@pytest.mark.parametrize("status", ["running", "pending"])
def test_a_run_still_going_is_not_evaluated(status: str) -> None:
    score = score_completion(make_task(SPEC), [], RunFacts(status, None))  # type: ignore[arg-type]
    assert score.value is None and score.passed is None


def test_missing_answer_fails_checks() -> None:
    score = score_completion(make_task(SPEC), [], RunFacts("finished", None))
    assert score.value == 0.0 and score.evidence["reason"] == "no final answer"


def test_require_finished_false_scores_checks_of_a_timed_out_run_but_never_passes_it() -> None:
    spec = '[tasks.completion]\nrequire_finished = false\nchecks = [{ exact = "ok" }]\n'
    for status in ("timed_out", "errored", "aborted"):
        score = score_completion(make_task(spec), [], RunFacts(status, "ok"))  # type: ignore[arg-type]
        assert (score.value, score.passed) == (1.0, False), status
        assert score.evidence["reason"] == (
            f"run did not end on its own (status {status}): never a pass"
        )
        assert score.version == "3"


def test_no_checks_means_finishing_is_enough() -> None:
    score = score_completion(make_task("[tasks.completion]\n"), [], RunFacts("finished"))
    assert score.passed is True


def test_no_completion_spec_is_not_evaluated() -> None:
    assert score_completion(make_task(""), [], RunFacts("finished")).value is None
