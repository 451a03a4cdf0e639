"""Result previews and trial verdicts of the trials comparison (`viewer.trial_summary`)."""

from __future__ import annotations

import json

from tracecard.traces.models import RunRow, ScoreRow
from tracecard.viewer.trial_summary import PREVIEW_CHARS, result_preview, trial_verdict


def mcp(*content: dict, **extra: object) -> str:
    return json.dumps({"content": list(content), "isError": False, **extra})


def test_a_preview_reads_the_content_not_the_envelope() -> None:
    text = mcp({"type": "text", "text": '{"status": "delivered"}'})
    assert result_preview(text) == '{"status": "delivered"}'
    two = mcp({"type": "text", "text": "first"}, {"type": "image", "mimeType": "image/png"})
    assert result_preview(two) == "first [image image/png]"
    structured = json.dumps({"content": [], "structuredContent": {"n": 1}})
    assert result_preview(structured) == '{"n":1}'
    assert result_preview("plain words") == "plain words"
    assert result_preview(None) == ""


def test_a_long_preview_is_cut_on_one_line_with_an_ellipsis() -> None:
    long = mcp({"type": "text", "text": "line one\n" + "word " * 200})
    preview = result_preview(long)
    assert PREVIEW_CHARS - 2 <= len(preview) <= PREVIEW_CHARS and preview.endswith("…")
    assert "\n" not in preview and preview.startswith("line one word")
    assert not result_preview(mcp({"type": "text", "text": "short"})).endswith("…")


def _run(status: str = "finished", error: str | None = None) -> RunRow:
    return RunRow(id="r", trace_id="t" * 32, root_span_id="s" * 16, status=status, error=error)


def _score(component: str, passed: bool | None, **evidence: object) -> ScoreRow:
    value = None if passed is None else float(passed)
    return ScoreRow(run_id="r", component=component, value=value, passed=passed,
                    evidence=dict(evidence), scorer=component, scorer_version="1")  # fmt: skip


def test_a_trial_verdict_names_the_first_failing_component_and_why() -> None:
    failed = trial_verdict(
        _run(),
        [
            _score("safety", False, reason="outside tools"),
            _score("invocation", True),
            _score("outcome", False, predicates=[
                {"probe": "pay", "path": "$.paid", "op": "eq", "value": True, "observed": False,
                 "holds": False},
            ]),
        ],
    )  # fmt: skip
    assert (failed.word, failed.component) == ("failed", "outcome")  # component order
    assert failed.reason == "pay $.paid: expected eq true, got false"  # the runs list's words
    assert trial_verdict(_run(), [_score("outcome", True)]).word == "passed"
    assert trial_verdict(_run(), [_score("outcome", None)]).word == "not evaluated"
    assert trial_verdict(_run(), []).word == "not evaluated"
    crashed = trial_verdict(_run("errored", "agent exited 1"), [_score("outcome", True)])
    assert (crashed.word, crashed.reason) == ("errored", "agent exited 1")
    # the runs list's words for a live trial, never "not evaluated" before it could be
    assert trial_verdict(_run("pending"), []).word == "pending"
    assert trial_verdict(_run("running"), [_score("outcome", False)]).word == "running"
