from __future__ import annotations

import pytest

from tracecard.scorers import RunFacts, evaluate_predicate, score_outcome
from tracecard.scorers.spec import Predicate

from .trace_helpers import FINISHED, make_task, probe_span, tool_call

SPEC = """
[tasks.outcome]
probes = [
  { id = "report", path = "report.json" },
  { id = "count", kind = "tool", upstream = "db", tool = "count_rows", arguments = { t = 1 } },
]
predicates = [
  { probe = "report", path = "$.status", op = "eq", value = "done" },
  { probe = "count", path = "structuredContent.n", op = "approx", value = 3, tolerance = 0.1 },
]
"""


def pred(op: str, path: str = "$", **kw: object) -> Predicate:
    return Predicate.model_validate({"probe": "p", "op": op, "path": path, **kw})


@pytest.mark.parametrize(
    ("predicate", "observed", "holds"),
    [
        (pred("eq", "$.a", value=1), {"a": 1.0}, True),
        (pred("eq", "$.a", value=1), {"a": 2}, False),
        (pred("eq", "$.a", value=1), {}, False),
        (pred("approx", "$.x", value=2.0, tolerance=0.05), {"x": 2.04}, True),
        (pred("approx", "$.x", value=2.0, tolerance=0.05), {"x": 2.06}, False),
        (pred("approx", "$.x", value=2.0), {"x": "2.0"}, False),
        (pred("contains", "$.text", value="ok"), {"text": "all ok"}, True),
        (pred("contains", "$.items", value={"id": 1}), {"items": [{"id": 1}]}, True),
        (pred("contains", "$.items", value=3), {"items": [1, 2]}, False),
        (pred("contains", "$", value="k"), {"k": 0}, True),
        (pred("exists", "$.items[1]"), {"items": [1, 2]}, True),
        (pred("exists", "$.items[2]"), {"items": [1, 2]}, False),
        (pred("exists", "$['odd key']"), {"odd key": 0}, True),
        (pred("absent", "$.gone"), {"other": 1}, True),
        (pred("absent", "$"), None, True),  # a missing file is observed as null
        (pred("absent", "$.a"), {"a": 1}, False),
    ],
)
def test_predicate_ops(predicate: Predicate, observed: object, holds: bool) -> None:
    assert evaluate_predicate(predicate, observed).ok is holds


def test_all_predicates_holding_is_a_pass() -> None:
    spans = [
        probe_span("report", {"status": "done"}),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert (score.value, score.passed) == (1.0, True)
    assert [p["span_id"] for p in score.evidence["predicates"]] == [s["span_id"] for s in spans]


def test_value_is_the_fraction_that_holds() -> None:
    spans = [
        tool_call("write_report", {"status": "failed"}),  # the run acted: partial credit
        probe_span("report", {"status": "failed"}),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert (score.value, score.passed) == (0.5, False)
    assert score.evidence["predicates"][0]["observed"] == "failed"


def test_a_probe_that_could_not_run_is_not_evaluated_never_a_pass() -> None:
    spans = [
        tool_call("write_report"),  # a run that acted (one that did nothing: 0, below)
        probe_span("report", {"status": "done"}),
        probe_span("count", error="upstream_unavailable: connection refused", kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert score.value is None and score.passed is None
    assert "connection refused" in score.evidence["reason"]


def test_a_missing_verifier_span_is_not_evaluated() -> None:
    spans = [tool_call("write_report"), probe_span("report", {"status": "done"})]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert score.passed is None
    assert score.evidence["not_evaluated"] == [
        {"probe": "count", "reason": "no verifier span for this probe"}
    ]


def test_agent_calls_are_never_read_as_observations() -> None:
    # The agent calling the probe's tool itself must not count as the state check.
    spans = [tool_call("count_rows", {"table": "t"}, upstream="db")]
    assert score_outcome(make_task(SPEC), spans, FINISHED).passed is None


def test_the_latest_observation_of_a_probe_wins() -> None:
    spans = [
        probe_span("report", {"status": "pending"}, start_ms=1000),
        probe_span("report", {"status": "done"}, start_ms=2000),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    assert score_outcome(make_task(SPEC), spans, FINISHED).passed is True


def test_a_run_without_calls_gets_no_credit_for_the_state_it_found() -> None:
    """#26.5: the predicates that held in the start state are `unchanged`; no partial credit."""
    spans = [
        probe_span("report", {"status": "failed"}),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert (score.value, score.passed) == (0.0, False)
    rows = score.evidence["predicates"]
    assert [r.get("unchanged") for r in rows] == [None, True]  # count held before the run
    assert score.evidence["reason"] == (
        "no tool calls: the 1 predicate(s) that hold held in the start state (unchanged); "
        "no partial credit"
    )
    assert score.version == "5"


def test_a_task_that_asks_to_leave_things_alone_passes_by_doing_nothing() -> None:
    spans = [
        probe_span("report", {"status": "done"}),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert (score.value, score.passed) == (1.0, True)
    assert all(r["unchanged"] for r in score.evidence["predicates"])


@pytest.mark.parametrize("status", ["errored", "timed_out", "aborted"])
def test_a_run_that_ended_badly_before_its_first_call_scores_0(status: str) -> None:
    """Decided (docs/scorers.md): 0, not "not evaluated" — an agent that crashes on one trial
    in five must not keep a pass rate of 4/4."""
    spans = [
        probe_span("report", {"status": "done"}),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    facts = RunFacts(status=status)  # type: ignore[arg-type]
    score = score_outcome(make_task(SPEC), spans, facts)
    assert (score.value, score.passed) == (0.0, False)  # every predicate held: still 0
    assert score.evidence["reason"].startswith(
        f"the run {status.replace('_', ' ')} before its first call"
    )
    # once it made a call, what it changed counts as before
    acted = score_outcome(make_task(SPEC), [tool_call("write_report"), *spans], facts)
    assert (acted.value, acted.passed) == (1.0, True)


def test_a_run_that_did_nothing_and_whose_state_could_not_be_read_scores_0() -> None:
    spans = [probe_span("report", {"status": "done"})]  # no call: the count probe never ran
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert (score.value, score.passed) == (0.0, False)
    assert score.evidence["reason"] == (
        "no tool calls, and the state could not be read (probe could not run: count: no "
        "verifier span for this probe): outcome 0 for a run that did nothing"
    )
    abstain = make_task(SPEC + "[tasks.invocation]\nexpect_no_calls = true\n")
    assert score_outcome(abstain, spans, FINISHED).value is None  # doing nothing was the task
