"""The first failure's one line says what was expected AND what the agent sent, from the
invocation evidence; nothing the agent sends can forge or break that line, and a redacted value
(stored as a fingerprint) is never shown, nor is the expected secret."""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tracecard.scorers import (
    build_scorecard,
    load_suite,
    score_invocation,
    to_csv,
    to_json,
    to_junit,
    to_markdown,
)
from tracecard.scorers.report import github_report
from tracecard.scorers.verdict import failure_reason, scores_verdict
from tracecard.traces.secrets import fingerprint

from .trace_helpers import FINISHED, make_task, root, tool_call

ROOT = Path(__file__).resolve().parents[2]
KEY = b"k" * 32
WITH_KEY = dataclasses.replace(FINISHED, fingerprint=functools.partial(fingerprint, KEY))
TICKET = make_task(
    """
[[tasks.invocation.calls]]
tool = "create_ticket"
arguments = { title = { any = true }, priority = "urgent" }
"""
)
SECRET_TASK = make_task(
    """
[[tasks.invocation.calls]]
tool = "login"
arguments = { access_token = "the-real-token" }
"""
)


def _reason(arguments: dict[str, object]) -> str:
    score = score_invocation(TICKET, [root(), tool_call("create_ticket", arguments)], FINISHED)
    verdict = scores_verdict([score])
    assert verdict.word == "failed" and verdict.component == "invocation"
    assert verdict.reason is not None
    return verdict.reason


def test_a_wrong_argument_says_what_was_expected_and_what_was_sent() -> None:
    assert _reason({"title": "x", "priority": "high"}) == (
        "create_ticket: priority: expected 'urgent', got 'high'"
    )
    assert (
        _reason({"title": "x", "priority": 3})
        == "create_ticket: priority: expected 'urgent', got 3"
    )
    assert _reason({"title": "x"}) == "create_ticket: priority: missing"
    no_call = score_invocation(TICKET, [root()], FINISHED)
    assert failure_reason("invocation", no_call.evidence) == "create_ticket: not called"


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        ("high', got 'urgent", "\"high', got 'urgent\""),  # quotes stay the value's own
        ("high\nurgent", "'high\\nurgent'"),  # one line: the newline is escaped
        ("<b>urgent</b>", "'<b>urgent</b>'"),  # text here; the pages and JUnit escape it
        ("x" * 500, "'" + "x" * 39 + "…'"),  # capped, still closed
        ({"level": ", got 'urgent'"}, '{"level":", got \'urgent\'"}'),
    ],
)
def test_nothing_the_agent_sends_forges_or_breaks_the_sentence(sent: object, shown: str) -> None:
    reason = _reason({"title": "x", "priority": sent})
    assert reason == f"create_ticket: priority: expected 'urgent', got {shown}"
    assert "\n" not in reason and not reason.endswith(", got 'urgent'")


def test_a_redacted_value_is_neither_shown_nor_is_the_secret_expected() -> None:
    sent = tool_call("login", {"access_token": fingerprint(KEY, "a-wrong-token")})
    score = score_invocation(SECRET_TASK, [root(), sent], WITH_KEY)
    reason = failure_reason("invocation", score.evidence)
    assert reason == "login: access_token: got a different value (redacted)"
    assert "redacted:" not in reason and "the-real-token" not in reason


def test_evidence_stored_before_version_7_says_the_old_sentence() -> None:
    score = score_invocation(
        TICKET, [tool_call("create_ticket", {"title": "x", "priority": "high"})], FINISHED
    )
    assert score.version == "7"
    old = {**score.evidence, "expected": [dict(score.evidence["expected"][0])]}
    old["expected"][0]["closest"] = [
        {k: v for k, v in c.items() if k != "got"} for c in old["expected"][0]["closest"]
    ]
    assert failure_reason("invocation", old) == "create_ticket: priority: expected 'urgent'"


def test_no_export_says_the_secret_or_its_fingerprint() -> None:
    """JSON's `first_failure`, CSV, Markdown, JUnit and the CI report all say the same line, and
    none of them the secret, the expectation (the secret) or the stored fingerprint."""
    sent = fingerprint(KEY, "a-wrong-token")
    score = score_invocation(
        SECRET_TASK, [root(), tool_call("login", {"access_token": sent})], WITH_KEY
    )
    suite = load_suite(ROOT / "examples" / "suites" / "basic.toml")
    run = {"run_id": "r1", "task_id": "read-notes", "trial": 0, "status": "finished",
           "components": [score.model_dump()], "flags": []}  # fmt: skip
    card = build_scorecard(suite, {"id": "e", "config": {"name": "c"}}, [run], resamples=10)
    said = "invocation: login: access_token: got a different value (redacted)"
    assert json.loads(to_json(card))["runs"][0]["first_failure"] == said
    (row,) = csv.DictReader(io.StringIO(to_csv(card)))
    assert row["first_failure"] == said
    junit = ET.fromstring(to_junit(card))
    failure = next(f for f in junit.iter("failure"))
    assert "access_token: got a different value (redacted)" in (failure.text or "")
    texts = {
        "csv": to_csv(card),
        "junit": to_junit(card),
        "markdown": to_markdown(card),
        "ci report": github_report(card, "http://ci:7800"),
    }
    for name, text in texts.items():
        for secret in ("a-wrong-token", "the-real-token", sent, "[redacted:"):
            assert secret not in text, (name, secret)


def test_a_multi_turn_run_names_its_failing_turn() -> None:
    turns = {
        "mode": "per_turn",
        "turns": [
            {"turn": 0, "passed": True, "expected": []},
            {"turn": 1, "passed": False, "reason": "turn not reached"},
        ],
    }
    assert failure_reason("invocation", turns) == "turn 1: turn not reached"
    turns["turns"][1] = {"turn": 1, "passed": False, "expected": [
        {"tool": "create_ticket", "span_id": None, "why": "no call to this tool"}]}  # fmt: skip
    assert failure_reason("invocation", turns) == "turn 1: create_ticket: not called"


def test_a_probed_value_is_said_the_same_way_and_never_a_fingerprint() -> None:
    """Outcome's line quotes what the probe observed like invocation's (a tool's state is no
    more trusted than an argument), and a redacted observation is never shown."""

    def said(value: object, observed: object) -> str:
        row = {"probe": "t", "path": "$.priority", "op": "eq", "value": value,
               "observed": observed, "holds": False}  # fmt: skip
        return failure_reason("outcome", {"predicates": [row]})

    assert said("urgent", "high") == "t $.priority: expected eq 'urgent', got 'high'"
    assert said(1, None) == "t $.priority: expected eq 1, got null"
    assert said("urgent", "x', got 'urgent\n") == (
        "t $.priority: expected eq 'urgent', got \"x', got 'urgent\\n\""
    )
    hidden = fingerprint(KEY, "hunter2")
    assert said(fingerprint(KEY, "hunter3"), hidden) == (
        "t $.priority: got a different value (redacted)"
    )


def test_a_stored_outcome_row_says_what_the_probe_observed() -> None:
    """The outcome scorer stores "eq 'urgent' failed" and the observed value: the line says
    both; a path that does not exist is said as stored."""
    row = {"probe": "t", "path": "$.p", "op": "eq", "value": "urgent", "observed": "high",
           "holds": False, "reason": "eq 'urgent' failed"}  # fmt: skip
    assert failure_reason("outcome", {"predicates": [row]}) == (
        "t $.p: expected eq 'urgent', got 'high'"
    )
    gone = {**row, "observed": None, "reason": "$.p does not exist"}
    assert failure_reason("outcome", {"predicates": [gone]}) == "t $.p: $.p does not exist"
