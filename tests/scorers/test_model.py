"""Scoring from the model side: model turns, requested calls linked to tool spans, the model's
answer as the final answer, `invocation.source = "model"`, abstention, budgets and flags."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tracecard.scorers import RunFacts, score_completion, score_efficiency, score_invocation
from tracecard.scorers.calls import agent_calls
from tracecard.scorers.flags import (
    MODEL_CALL_NOT_EXECUTED,
    TOOL_RESULT_UNREAD,
    model_flags,
    score_run,
)
from tracecard.scorers.model import link_calls, model_answer, model_turns
from tracecard.traces import semconv as sc

from .trace_helpers import make_task, root, span, tool_call

NO_ANSWER = RunFacts(status="finished")


def model_span(
    *,
    text: str = "",
    calls: list[dict[str, Any]] | None = None,
    results: list[str] | None = None,
    tokens: tuple[int, int] = (10, 5),
    start_ms: int | None = None,
    duration_ms: int = 30,
) -> dict[str, Any]:
    """A `chat` span as the /llm/ proxy records it."""
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts += [{"type": "tool_call", **c} for c in calls or []]
    inputs: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
    for call_id in results or []:
        inputs.append(
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": call_id, "response": "ok"}],
            }
        )
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.GEN_AI_PROVIDER_NAME: "openai",
        sc.GEN_AI_REQUEST_MODEL: "m",
        sc.ROLE: sc.ROLE_AGENT,
        sc.HTTP_REQUEST_METHOD: "POST",
        sc.GEN_AI_USAGE_INPUT_TOKENS: tokens[0],
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: tokens[1],
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(inputs),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "parts": parts}]),
    }
    if calls:
        attrs[sc.LLM_TOOL_CALLS] = json.dumps(calls)
    return span("chat m", attrs, start_ms=start_ms, duration_ms=duration_ms)


ADD = {"id": "c1", "name": "add", "arguments": {"a": 2, "b": 40}}


def agent_loop() -> list[dict[str, Any]]:
    """Model asks for add, the tool runs it, the model reads the result and answers."""
    return [
        root(),
        model_span(calls=[ADD], start_ms=100),
        tool_call("add", {"b": 40, "a": 2.0}, start_ms=200),
        model_span(text="It is 42.", results=["c1"], start_ms=300),
    ]


def test_model_spans_are_not_tool_calls() -> None:
    assert [c.tool for c in agent_calls(agent_loop())] == ["add"]


def test_a_requested_call_links_to_the_tool_span_that_ran_it() -> None:
    spans = agent_loop()
    turns = model_turns(spans)
    links = link_calls(turns, agent_calls(spans))
    assert [(lk.model_span_id, lk.tool_span_id, lk.call_id) for lk in links] == [
        (spans[1]["span_id"], spans[2]["span_id"], "c1")
    ]
    assert model_flags(spans) == []


def test_a_tool_span_before_the_model_answered_is_not_its_execution() -> None:
    spans = [
        root(),
        tool_call("add", {"a": 2, "b": 40}, start_ms=50),
        model_span(calls=[ADD], start_ms=100),
    ]
    assert link_calls(model_turns(spans), agent_calls(spans)) == []


def test_dropped_call_and_unread_result_are_flagged() -> None:
    dropped = [root(), model_span(calls=[ADD], start_ms=100), model_span(text="42", start_ms=300)]
    dropped.append(tool_call("echo", {"text": "x"}, start_ms=400))  # the run does know tools
    dropped.append(tool_call("add", {"a": 1, "b": 1}, start_ms=500))  # other arguments: not it
    assert model_flags(dropped) == [MODEL_CALL_NOT_EXECUTED]
    unread = agent_loop()
    unread[3] = model_span(text="It is 42.", start_ms=300)  # no tool_call_response fed back
    assert model_flags(unread) == [TOOL_RESULT_UNREAD]
    task = make_task('[tasks.invocation]\ncalls = [{ tool = "add" }]\n')
    assert TOOL_RESULT_UNREAD in score_run(task, unread, NO_ANSWER).flags


def test_completion_falls_back_to_the_models_last_answer() -> None:
    task = make_task('[tasks.completion]\nchecks = [{ contains = "42" }]\n')
    spans = agent_loop()
    score = score_completion(task, spans, NO_ANSWER)
    assert score.passed is True and score.evidence["answer_source"] == "model"
    assert score.evidence["answer_span_id"] == spans[3]["span_id"]
    assert model_answer(model_turns(spans)) == ("It is 42.", spans[3]["span_id"])
    # the agent's own answer wins; a wrong one fails even though the model said 42
    wrong = score_completion(task, spans, RunFacts(status="finished", final_answer="41"))
    assert wrong.passed is False and wrong.evidence["answer_source"] == "agent"
    # a model that never answered in text gives no answer
    silent = score_completion(task, spans[:3], NO_ANSWER)
    assert silent.passed is False and silent.evidence["reason"] == "no final answer"


MODEL_SOURCE = """
[tasks.invocation]
source = "model"
calls = [{ tool = "add", arguments = { a = 2, b = 40 } }]
"""


def test_source_model_scores_requested_calls_the_framework_dropped() -> None:
    spans = [root(), model_span(calls=[ADD], start_ms=100)]  # no tool ever ran it
    by_model = score_invocation(make_task(MODEL_SOURCE), spans, NO_ANSWER)
    assert by_model.passed is True and by_model.evidence["source"] == "model"
    by_tools = score_invocation(
        make_task(MODEL_SOURCE.replace('source = "model"\n', "")), spans, NO_ANSWER
    )
    assert by_tools.passed is False
    wrong = [root(), model_span(calls=[{**ADD, "arguments": {"a": 2, "b": 41}}])]
    assert score_invocation(make_task(MODEL_SOURCE), wrong, NO_ANSWER).passed is False


def test_abstention_is_judged_on_the_models_output() -> None:
    task = make_task("[tasks.invocation]\nexpect_no_calls = true\n")
    requested = [root(), model_span(calls=[ADD])]  # asked for a call nobody ran: not abstaining
    assert score_invocation(task, requested, NO_ANSWER).passed is False
    answered = [root(), model_span(text="No tool needed.")]
    assert score_invocation(task, answered, NO_ANSWER).passed is True


def test_efficiency_counts_tokens_turns_and_model_latency_against_budgets() -> None:
    spans = agent_loop()
    free = score_efficiency(make_task(""), spans, NO_ANSWER)
    assert free.evidence["model_turns"] == 2
    assert (free.evidence["input_tokens"], free.evidence["output_tokens"]) == (20, 10)
    assert free.evidence["model_latency_ms"] == pytest.approx(60.0)
    budget = "[tasks.efficiency]\nmax_tokens = 15\nmax_model_turns = 1\nmax_model_latency_ms = 30\n"
    tight = score_efficiency(make_task(budget), spans, NO_ANSWER)
    assert tight.evidence["parts"]["token_budget"] == pytest.approx(0.5)
    assert tight.evidence["parts"]["model_turns"] == pytest.approx(0.5)
    assert tight.evidence["parts"]["model_latency"] == pytest.approx(0.5)
    assert tight.value == pytest.approx(0.125) and tight.passed is False


def test_a_verifier_chat_span_is_not_a_model_turn() -> None:
    probe = model_span(text="x")
    probe["attributes"][sc.ROLE] = sc.ROLE_VERIFIER
    assert model_turns([probe]) == []
