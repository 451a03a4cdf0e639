"""The waterfall model: tree order, bar geometry, errors, agent spans, evidence by span id."""

from __future__ import annotations

from tracecard.traces import semconv as sc
from tracecard.traces.models import ScoreRow
from tracecard.viewer.payloads import human_size, payload, pretty
from tracecard.viewer.trace_view import build_trace, cited_span_ids, evidence_items, span_evidence

ROOT, CHAT, CALL, LATE, ORPHAN = "a" * 16, "b" * 16, "c" * 16, "d" * 16, "e" * 16


def span(span_id: str, parent: str | None, start: int, end: int | None, **attributes: object):
    return {
        "span_id": span_id,
        "parent_span_id": parent,
        "name": f"span {span_id[:1]}",
        "start_time_unix_nano": start,
        "end_time_unix_nano": end,
        "status": {"code": 0},
        "attributes": attributes,
        "resource": {"service.name": "tracecard"},
    }


def spans() -> list[dict]:
    chat = span(CHAT, ROOT, 100, 400)
    chat["resource"] = {"service.name": "demo-agent"}
    return [
        span(ROOT, None, 0, 1000),
        chat,
        span(CALL, CHAT, 200, 300, **{sc.ERROR_TYPE: "tool_error", sc.GEN_AI_TOOL_NAME: "x"}),
        span(LATE, ROOT, 500, None),
        span(ORPHAN, "f" * 16, 900, 1000),
    ]


def score(component: str, evidence: dict, passed: bool = False) -> ScoreRow:
    return ScoreRow(run_id="r", component=component, value=0.0, passed=passed,
                    evidence=evidence, scorer=component, scorer_version="1")


def test_tree_order_depth_and_geometry() -> None:
    view = build_trace(spans(), [])
    assert [(line.span_id, line.depth) for line in view.lines] == [
        (ROOT, 0), (CHAT, 1), (CALL, 2), (LATE, 1), (ORPHAN, 0),
    ]
    by_id = {line.span_id: line for line in view.lines}
    assert (by_id[ROOT].offset, by_id[ROOT].width) == (0, 1000)
    assert (by_id[CALL].offset, by_id[CALL].width) == (200, 100)
    assert by_id[LATE].duration_ns is None and by_id[LATE].width == 500  # open: to the end
    assert by_id[CALL].kind == "error" and view.errors == 1
    assert by_id[CHAT].kind == "agent" and by_id[CHAT].source == "demo-agent"


def test_evidence_attaches_to_every_span_it_cites_anywhere() -> None:
    scores = [
        score("invocation", {"expected": [{"span_id": CALL}, {"closest": [{"span_id": LATE}]}],
                             "note": f"see {ROOT.upper()} and trace {'1' * 32}"}),
        score("outcome", {"predicates": [{"span_id": "0123456789abcdef"}]}, passed=True),
    ]
    view = build_trace(spans(), scores)
    by_id = {line.span_id: line for line in view.lines}
    assert [i.where for i in by_id[CALL].evidence] == ["expected[0]"]
    assert [i.where for i in by_id[LATE].evidence] == ["expected[1]"]
    assert [i.where for i in by_id[ROOT].evidence] == ["note"]  # found inside free text
    assert by_id[CALL].verdicts == [("invocation", False)]
    assert view.unknown_citations == ["0123456789abcdef"]  # a 32-hex trace id is not a span id
    assert [i.where for i in span_evidence(LATE, scores)] == ["expected[1]"]


def test_evidence_items_and_citations() -> None:
    items = evidence_items(score("safety", {"violations": [], "gate": 1.0}))
    assert [i.where for i in items] == ["violations", "gate"]
    assert cited_span_ids({"k": [CALL, {"x": CALL}]}) == (CALL,)


def test_payloads_pretty_sized_and_collapsed() -> None:
    assert pretty('{"b": 1}') == '{\n  "b": 1\n}'
    assert pretty("not json <b>") == "not json <b>"
    mcp = pretty('{"content": [{"type": "text", "text": "{\\"id\\": 7}"}]}')
    assert '"id": 7' in mcp  # an MCP text result that is JSON is shown as JSON
    big = payload("result", "A" * 10_000)
    assert big.collapsed and big.size == 10_000 and len(big.preview) <= 161
    assert not payload("args", "{}").collapsed
    assert human_size(1536) == "1.5 KB" and human_size(10) == "10 B"
