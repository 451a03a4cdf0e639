"""Per-turn scoring: calls grouped by turn, ordered across turns, per-turn abstention, result
matchers, per-turn outcomes with differing fields named."""

from __future__ import annotations

from typing import Any

from tracecard.scorers import parse_suite, score_invocation, score_outcome
from tracecard.scorers.suite import Task
from tracecard.traces import semconv as sc

from .trace_helpers import FINISHED, probe_span, root, span, tool_call

SUITE = """schema_version = 2
name = "mt"

[[tasks]]
id = "t"
upstreams = ["fs"]

[[tasks.turns]]
user = "make temp, then list it"
[tasks.turns.invocation]
calls = [
  { tool = "mkdir", arguments = { dir_name = "temp" } },
  { tool = "ls", result = { exact = "temp" } },
]
[tasks.turns.outcome]
probes = [{ id = "state", upstream = "fs", tool = "bfcl_state" }]
predicates = [{ probe = "state", op = "eq", value = { cwd = "/", dirs = ["temp"] } }]

[[tasks.turns]]
user = "what is the weather?"
invocation = { expect_no_calls = true }

[[tasks.turns]]
user = "go into temp"
invocation = { calls = [{ tool = "cd", arguments = { folder = "temp" } }] }
[tasks.turns.outcome]
probes = [{ id = "state", upstream = "fs", tool = "bfcl_state" }]
predicates = [{ probe = "state", op = "eq", value = { cwd = "/temp", dirs = ["temp"] } }]
"""

TASK: Task = parse_suite(SUITE, "toml", "s.toml").tasks[0]


def turn(index: int, start_ms: int) -> dict[str, Any]:
    return span(
        f"turn {index}",
        {sc.RUN_ID: "run-1", sc.TURN_INDEX: index, sc.TURN_USER: "..."},
        start_ms=start_ms,
        duration_ms=900,
    )


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def state(turn_index: int, value: Any, start_ms: int) -> dict[str, Any]:
    probe = probe_span("state", value, kind="tool", start_ms=start_ms)
    probe["attributes"][sc.TURN_INDEX] = turn_index
    return probe


def good_trace() -> list[dict[str, Any]]:
    return [
        root(),
        turn(0, 1000),
        tool_call("ls", {}, result=text("temp"), start_ms=1200),  # order within a turn is free
        tool_call("mkdir", {"dir_name": "temp"}, start_ms=1100),
        state(0, {"cwd": "/", "dirs": ["temp"]}, 1950),
        turn(1, 2000),
        turn(2, 3000),
        tool_call("cd", {"folder": "temp"}, start_ms=3100),
        state(2, {"cwd": "/temp", "dirs": ["temp"]}, 3950),
    ]


def test_the_right_calls_in_the_right_turns_pass() -> None:
    invocation = score_invocation(TASK, good_trace(), FINISHED)
    assert (invocation.value, invocation.passed) == (1.0, True)
    assert [row["turn"] for row in invocation.evidence["turns"]] == [0, 1, 2]
    outcome = score_outcome(TASK, good_trace(), FINISHED)
    assert (outcome.value, outcome.passed) == (1.0, True)


def test_a_call_one_turn_late_fails_both_turns() -> None:
    spans = good_trace()
    late = next(s for s in spans if s["name"] == "tools/call cd")
    late["start_time_unix_nano"] = 2_100 * 1_000_000  # made while turn 1 (no calls) was open
    score = score_invocation(TASK, spans, FINISHED)
    rows = {row["turn"]: row for row in score.evidence["turns"]}
    assert rows[1]["passed"] is False and rows[1]["calls"][0]["tool"] == "cd"
    assert rows[2]["passed"] is False and rows[2]["expected"][0]["why"] == "no call to this tool"
    assert score.passed is False and score.value == 1 / 3


def test_a_call_in_a_turn_that_needs_none_fails_that_turn() -> None:
    spans = [*good_trace(), tool_call("weather", {}, start_ms=2500)]
    score = score_invocation(TASK, spans, FINISHED)
    assert score.passed is False
    assert [r["passed"] for r in score.evidence["turns"]] == [True, False, True]


def test_a_wrong_result_does_not_match() -> None:
    spans = good_trace()
    ls = next(s for s in spans if s["name"] == "tools/call ls")
    ls["attributes"][sc.GEN_AI_TOOL_CALL_RESULT] = '{"content": [{"type": "text", "text": "x"}]}'
    score = score_invocation(TASK, spans, FINISHED)
    first = score.evidence["turns"][0]
    assert first["passed"] is False
    assert first["expected"][1]["closest"][0]["why"][0].startswith("result: ")


def test_turns_never_reached_fail() -> None:
    spans = good_trace()[:5]  # the agent stopped after turn 0
    invocation = score_invocation(TASK, spans, FINISHED)
    assert invocation.passed is False and invocation.value == 1 / 3
    outcome = score_outcome(TASK, spans, FINISHED)
    assert outcome.passed is False and outcome.evidence["turns"][1]["reason"] == "turn not reached"


def test_a_state_mismatch_names_the_differing_field() -> None:
    spans = good_trace()
    spans[-1] = state(2, {"cwd": "/", "dirs": ["temp"]}, 3950)
    outcome = score_outcome(TASK, spans, FINISHED)
    assert (outcome.value, outcome.passed) == (0.5, False)
    predicate = outcome.evidence["turns"][1]["predicates"][0]
    assert predicate["differing"] == ["$.cwd"]


def test_a_probe_of_another_turn_is_not_this_turns_observation() -> None:
    spans = [
        s for s in good_trace() if s["attributes"].get(sc.TURN_INDEX) != 2 or "turn" in s["name"]
    ]
    outcome = score_outcome(TASK, spans, FINISHED)
    assert outcome.value is None and outcome.passed is None  # turn 2 reached, never probed


def test_a_turn_span_sent_by_the_agent_as_a_tool_span_is_no_turn() -> None:
    forged = turn(1, 1050)
    forged["attributes"][sc.ROLE] = sc.ROLE_AGENT
    spans = [*good_trace(), forged]
    assert score_invocation(TASK, spans, FINISHED).passed is True


def test_a_turn_span_the_agent_posted_over_otlp_is_no_turn() -> None:
    """Ingest marks it agent_reported (it has no role): an earlier forged `turn 2` would
    otherwise pull the turn-0 calls into turn 2."""
    forged = turn(2, 1050)
    forged["attributes"][sc.EVIDENCE] = sc.EVIDENCE_AGENT_REPORTED
    assert score_invocation(TASK, [*good_trace(), forged], FINISHED).passed is True
    del forged["attributes"][sc.EVIDENCE]  # unmarked, the same span moves the calls
    assert score_invocation(TASK, [*good_trace(), forged], FINISHED).passed is False
