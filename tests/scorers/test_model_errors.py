"""A failed model request is a model error, not a model turn, and its usage is unknown (absent),
not 0: efficiency and the conversation count the two apart (#26.3)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scorers.test_model import NO_ANSWER, agent_loop, model_span
from tests.scorers.trace_helpers import make_task, root
from tracecard.scorers import score_efficiency
from tracecard.scorers.model import ModelUsage, model_turns
from tracecard.traces import semconv as sc
from tracecard.viewer.conversation import annotate_lines, build_model_view
from tracecard.viewer.trace_view import build_trace


def failed_span(error_type: str, start_ms: int) -> dict[str, Any]:
    """A request the upstream answered with an error: no usage recorded, `error.type` set."""
    span = model_span(start_ms=start_ms)
    attrs = span["attributes"]
    del attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]
    del attrs[sc.GEN_AI_OUTPUT_MESSAGES]
    attrs[sc.ERROR_TYPE] = error_type
    span["status"] = {"code": 2, "message": "does not match the expected peg-native format"}
    return span


def test_failed_requests_are_model_errors_with_unknown_usage() -> None:
    spans = [*agent_loop(), failed_span("500", 400), failed_span("server_error", 500)]
    usage = ModelUsage.of(model_turns(spans))
    assert (usage.turns, usage.errors) == (2, 2)
    assert (usage.input_tokens, usage.output_tokens, usage.usage_unknown) == (20, 10, 2)
    evidence = score_efficiency(make_task(""), spans, NO_ANSWER).evidence
    assert evidence["model_turns"] == 2 and evidence["model_errors"] == 2
    assert (evidence["input_tokens"], evidence["output_tokens"]) == (20, 10)
    assert evidence["usage_unknown"] == 2
    # the turn budget counts answered turns: two failed retries do not spend it
    budget = score_efficiency(
        make_task("[tasks.efficiency]\nmax_model_turns = 2\n"), spans, NO_ANSWER
    )
    assert budget.evidence["parts"]["model_turns"] == pytest.approx(1.0)


def test_a_run_whose_every_request_failed_has_no_token_count() -> None:
    spans = [root(), failed_span("500", 100), failed_span("500", 200), failed_span("500", 300)]
    evidence = score_efficiency(make_task(""), spans, NO_ANSWER).evidence
    assert evidence["model_turns"] == 0 and evidence["model_errors"] == 3
    assert evidence["input_tokens"] is None and evidence["output_tokens"] is None  # not 0
    view = build_model_view(spans)
    assert view is not None
    trace = build_trace(spans, [])
    annotate_lines(trace.lines, view)
    chips = [line.model_chip for line in trace.lines if line.model_chip]
    assert chips == ["usage unknown"] * 3  # not "0→0 tok"


def test_an_answer_without_usage_says_so_on_its_row() -> None:
    answered = model_span(text="hi", start_ms=100)
    del answered["attributes"][sc.GEN_AI_USAGE_OUTPUT_TOKENS]
    spans = [root(), answered]
    view = build_model_view(spans)
    assert view is not None
    trace = build_trace(spans, [])
    annotate_lines(trace.lines, view)
    assert [line.model_chip for line in trace.lines if line.model_chip] == ["10→? tok"]
    assert view.usage.output_tokens is None and view.usage.usage_unknown == 0
