"""The one-line reason an audit finding quotes from a scorer's evidence."""

from __future__ import annotations

from tracecard.scorers.audit import first_reason


def test_a_per_turn_invocation_names_the_turn_and_the_differing_result() -> None:
    evidence = {
        "mode": "per_turn",
        "turns": [
            {"turn": 0, "passed": True, "expected": [{"tool": "ls", "span_id": "a"}]},
            {
                "turn": 1,
                "passed": False,
                "expected": [
                    {"tool": "cd", "span_id": "b"},
                    {
                        "tool": "post_tweet",
                        "span_id": None,
                        "closest": [{"span_id": "c", "why": ["result: expected '{\"id\": 10}'"]}],
                    },
                ],
            },
        ],
    }
    assert first_reason(evidence) == (
        "turn 1: expected post_tweet, closest call differs: result: expected '{\"id\": 10}'"
    )


def test_a_missing_call_and_a_failed_predicate() -> None:
    missing = {"expected": [{"tool": "set_value", "span_id": None, "why": "no call to this tool"}]}
    assert first_reason(missing) == "expected set_value: no call to this tool"
    predicate = {
        "predicates": [
            {"probe": "s", "path": "$.a", "op": "eq", "value": 1, "holds": True, "observed": 1},
            {"probe": "s", "path": "$.b", "op": "eq", "value": 2, "holds": False, "observed": 0},
        ]
    }
    assert first_reason(predicate) == "s $.b eq 2: observed 0"
    assert len(first_reason({"reason": "x" * 500})) == 160
