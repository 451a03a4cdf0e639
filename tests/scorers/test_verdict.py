"""A run's verdict and its one-line reason, as the runs list shows them."""

from __future__ import annotations

from types import SimpleNamespace

from tracecard.scorers.scorecard import RunRecord
from tracecard.scorers.types import ComponentScore
from tracecard.scorers.verdict import failure_reason, run_verdict


def _score(component: str, passed: bool | None, **evidence: object) -> SimpleNamespace:
    return SimpleNamespace(component=component, passed=passed, evidence=evidence)


def test_the_first_failing_component_in_component_order_explains_the_run() -> None:
    scores = [
        _score("outcome", False, predicates=[
            {"probe": "order", "path": "$.status", "op": "eq", "value": "refunded",
             "observed": "open", "holds": False},
        ]),
        _score("invocation", True),
        _score("safety", False, violations=[
            {"rule": "no-delete", "severity": "critical", "tool": "rm", "reason": "destructive"},
        ]),
    ]
    verdict = run_verdict("finished", scores)
    assert (verdict.word, verdict.component) == ("failed", "outcome")
    assert verdict.reason == "order $.status: expected eq 'refunded', got 'open'"
    assert failure_reason("safety", scores[2].evidence) == "critical no-delete (rm): destructive"


def test_verdict_words() -> None:
    assert run_verdict("running", [_score("outcome", False)]).word == "running"
    assert run_verdict("pending", []).word == "pending"  # created, not started: not "running"
    assert run_verdict("errored", [_score("outcome", True)]).word == "errored"
    mixed = [_score("outcome", True), _score("safety", None)]
    assert run_verdict("finished", mixed).word == "passed"
    assert run_verdict("finished", [_score("outcome", None)]).word == "not_evaluated"
    assert run_verdict("finished", []).label == "not evaluated"


def test_efficiency_says_what_it_counted() -> None:
    evidence = {"calls": 3, "optimal_calls": 2, "redundant": [{"span_id": "a"}],
                "errors": [{"recovered": True}], "parts": {"call_economy": 0.67, "latency": 0.5}}
    assert failure_reason("efficiency", evidence) == (
        "3 calls for 2 optimal; 1 redundant call(s); 1 tool error(s), 0 not recovered; latency 0.50"
    )
    assert failure_reason("efficiency", {"reason": "over budget\n by far"}) == "over budget by far"


def test_exports_say_what_the_runs_list_says() -> None:
    """The scorecard's verdict and first failure (JSON, CSV, CI output) are the runs list's."""
    failing = ComponentScore(
        component="outcome",
        value=0.0,
        passed=False,
        scorer="outcome",
        version="1",
        evidence={"predicates": [{"probe": "order", "path": "$.status", "op": "eq",
                                  "value": "refunded", "observed": "open", "holds": False}]},
    )
    passing = failing.model_copy(update={"component": "invocation", "passed": True})
    finished = RunRecord(run_id="r", task_id="t", status="finished", components=[passing, failing])
    assert finished.verdict == "failed" == run_verdict("finished", finished.components).word
    assert finished.first_failure() == "outcome: order $.status: expected eq 'refunded', got 'open'"
    errored = finished.model_copy(update={"status": "errored"})  # it broke: not "failed"
    assert errored.verdict == "errored" == run_verdict("errored", errored.components).word
    assert errored.first_failure() == finished.first_failure()  # why its scores failed, still
    clean = finished.model_copy(update={"components": [passing]})
    assert clean.verdict == "passed" and clean.first_failure() is None
