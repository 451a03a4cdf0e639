from __future__ import annotations

import pytest

from tracecard.scorers import evaluate_predicate, score_outcome
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
        probe_span("report", {"status": "failed"}),
        probe_span("count", {"structuredContent": {"n": 3}}, kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert (score.value, score.passed) == (0.5, False)
    assert score.evidence["predicates"][0]["observed"] == "failed"


def test_a_probe_that_could_not_run_is_not_evaluated_never_a_pass() -> None:
    spans = [
        probe_span("report", {"status": "done"}),
        probe_span("count", error="upstream_unavailable: connection refused", kind="tool"),
    ]
    score = score_outcome(make_task(SPEC), spans, FINISHED)
    assert score.value is None and score.passed is None
    assert "connection refused" in score.evidence["reason"]


def test_a_missing_verifier_span_is_not_evaluated() -> None:
    score = score_outcome(make_task(SPEC), [probe_span("report", {"status": "done"})], FINISHED)
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
