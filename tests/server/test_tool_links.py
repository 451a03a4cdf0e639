"""The model -> tool link made when a tool span ends (server/recording/tool_links.py), and the
scorers taking a recorded link as it is (scorers.model.link_calls)."""

from __future__ import annotations

from opentelemetry.trace import SpanContext, TraceFlags

from tests.scorers.test_model import model_span
from tests.scorers.trace_helpers import root, tool_call
from tracecard.scorers.calls import agent_calls
from tracecard.scorers.model import link_calls, model_turns, requested_links
from tracecard.server.recording.tool_links import FORWARDED, MATCHED, ToolCallLinks
from tracecard.traces import semconv as sc

TRACE = 0x1234


def context(span: int) -> SpanContext:
    return SpanContext(TRACE, span, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def test_the_earliest_matching_request_is_taken_once_and_only_after_the_answer() -> None:
    links = ToolCallLinks()
    add = {"name": "add", "arguments": {"a": 2, "b": 40}}
    links.requested("r1", context(1), [{**add, "id": "c1"}], end_ns=100)
    links.requested("r1", context(2), [{**add, "id": "c2"}], end_ns=200)
    links.requested("r1", context(3), [{"id": "c3", "name": "add", "complete": False}], 300)
    # a call that started before the second answer ended can only be the first request's
    first, call_id, source = links.executed("r1", "add", {"b": 40, "a": 2.0}, 150, None)
    assert first is not None and first.context.span_id == 1 and (call_id, source) == ("c1", MATCHED)
    second, call_id, _ = links.executed("r1", "add", {"a": 2, "b": 40}, 400, None)
    assert second is not None and second.context.span_id == 2 and call_id == "c2"
    # taken once each; an incomplete (cut) request is never matched; other runs see nothing
    assert links.executed("r1", "add", {"a": 2, "b": 40}, 500, None) == (None, None, None)
    assert links.executed("r1", "add", None, 500, None) == (None, None, None)
    links.requested("r2", context(4), [{**add, "id": "c4"}], end_ns=100)
    assert links.executed("r1", "echo", {}, 500, None) == (None, None, None)


def test_a_forwarded_id_wins_and_is_kept_without_a_request() -> None:
    links = ToolCallLinks()
    links.requested("r1", context(1), [{"id": "c1", "name": "add", "arguments": {"a": 1}}], 100)
    found, call_id, source = links.executed("r1", "add", {"a": 999}, 200, "c1")
    assert found is not None and (call_id, source) == ("c1", FORWARDED)  # by id, not arguments
    assert links.executed("r1", "add", {"a": 1}, 300, "zz") == (None, "zz", FORWARDED)


def test_scorers_take_the_recorded_link_before_matching_arguments() -> None:
    """Two identical requests: by arguments the tool span would go to the first; the proxy
    recorded that it ran the second (the framework forwarded its id)."""
    add = {"name": "add", "arguments": {"a": 1}}
    first = model_span(calls=[{**add, "id": "c1"}], start_ms=100)
    second = model_span(calls=[{**add, "id": "c2"}], start_ms=200)
    ran = tool_call("add", {"a": 1}, start_ms=300)
    ran["attributes"][sc.GEN_AI_TOOL_CALL_ID] = "c2"
    link = {"trace_id": ran["trace_id"], "span_id": second["span_id"]}
    ran["links"] = [{**link, "attributes": {sc.LINK_TYPE: sc.LINK_REQUESTED_BY}}]
    spans = [root(), first, second, ran]
    turns, calls = model_turns(spans), agent_calls(spans)
    recorded = requested_links(spans)
    assert recorded == {ran["span_id"]: (second["span_id"], "c2")}
    [linked] = link_calls(turns, calls, recorded)
    assert (linked.model_span_id, linked.call_id) == (second["span_id"], "c2")
    [guessed] = link_calls(turns, calls)  # without the recorded link: the earliest request
    assert guessed.model_span_id == first["span_id"]
