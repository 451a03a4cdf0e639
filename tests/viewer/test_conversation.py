"""The trace page's model side: the transcript in reading order, chips on model and tool rows."""

from __future__ import annotations

from tests.scorers.test_model import ADD, agent_loop, model_span
from tests.scorers.trace_helpers import root, tool_call
from tracecard.traces import semconv as sc
from tracecard.viewer.conversation import annotate_lines, build_model_view, transcript
from tracecard.viewer.trace_view import build_trace


def test_transcript_adds_only_what_each_request_repeats_anew() -> None:
    spans = agent_loop()
    view = build_model_view(spans)
    assert view is not None
    rows = [(e.role, e.kind) for e in view.transcript]
    # turn 1: the user's question, the model's call; turn 2 repeats the question (the scripted
    # history is not the exact conversation, so it is shown again), the result, the answer
    assert rows[:2] == [("user", "text"), ("assistant", "tool_call")]
    assert rows[-2:] == [("tool", "tool_result"), ("assistant", "text")]
    assert (view.transcript[1].label, view.transcript[1].call_id) == ("add", "c1")
    assert view.transcript[-1].text == "It is 42."
    assert (view.usage.input_tokens, view.usage.output_tokens) == (20, 10)


def test_a_repeated_history_is_not_shown_twice() -> None:
    first = model_span(text="hello")
    view = build_model_view([root(), first])
    assert view is not None
    turn = view.turns[0]
    second = type(turn)(
        **{
            **turn.__dict__,
            "span_id": "b" * 16,
            "input_messages": turn.input_messages + turn.output_messages,
        }
    )
    entries = transcript([turn, second])
    assert [e.text for e in entries] == ["q", "hello", "hello"]  # q once; the answer again


def test_model_rows_get_tokens_and_tool_rows_their_requester() -> None:
    spans = agent_loop()
    unlinked = build_model_view(spans)  # the viewer reads the recorded link, never guesses one
    assert unlinked is not None and unlinked.requested_by == {}
    link = {"trace_id": spans[1]["trace_id"], "span_id": spans[1]["span_id"]}
    spans[2]["links"] = [{**link, "attributes": {sc.LINK_TYPE: sc.LINK_REQUESTED_BY}}]
    view = build_model_view(spans)
    assert view is not None
    trace = build_trace(spans, [])
    annotate_lines(trace.lines, view)
    by_id = {line.span_id: line for line in trace.lines}
    assert by_id[spans[1]["span_id"]].model_chip == "10→5 tok"
    assert by_id[spans[1]["span_id"]].kind == "model"
    assert by_id[spans[2]["span_id"]].requested_by == spans[1]["span_id"]
    assert build_model_view([root(), *spans[2:3]]) is None  # no model span: no model view
    assert ADD["name"] == "add"


def test_trials_comparison_aligns_model_turns_with_model_turns() -> None:
    from tracecard.traces.models import RunRow
    from tracecard.viewer.compare_runs import MODEL_STEP, compare_runs

    same = agent_loop()
    # trial 2 asked for other arguments first, then retried: the turns still line up as turns
    other = [
        root(),
        model_span(calls=[{**ADD, "arguments": {"a": 1, "b": 1}}], start_ms=100),
        tool_call("add", {"a": 1, "b": 1}, start_ms=200),
        model_span(text="It is 2.", results=["c1"], start_ms=300),
    ]
    runs = [
        RunRow(id=f"{n:016x}", task_id="t", trial=n, trace_id=f"{n:032x}", root_span_id="a" * 16)
        for n in (1, 2)
    ]
    view = compare_runs(runs, {runs[0].id: same, runs[1].id: other}, {})
    steps = [[cell.tool if cell else None for cell in row.cells] for row in view.rows]
    assert steps == [[MODEL_STEP, MODEL_STEP], ["add", "add"], [MODEL_STEP, MODEL_STEP]]
    assert view.first_divergence == 0  # the first model turn already asked for other arguments
    answers = [cell.arguments for cell in view.rows[2].cells if cell]
    assert answers == [{"answer": "It is 42."}, {"answer": "It is 2."}]
