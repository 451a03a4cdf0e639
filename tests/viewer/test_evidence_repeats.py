"""The invocation evidence of a loop (identical calls past the suite's `max_repeats`), as the real
scorer stores it, reads as a table: the tool, how many times it was called, how many were allowed,
how many were charged, with links to the charged calls; it was a raw one-line JSON list of span
ids under "other evidence", wrapping mid-token."""

from __future__ import annotations

from tracecard.scorers.calls import ToolCall
from tracecard.scorers.invocation import evaluate_calls
from tracecard.scorers.spec import ExpectedCall, InvocationSpec
from tracecard.traces.models import ScoreRow
from tracecard.viewer.evidence import component_evidence


def _call(n: int) -> ToolCall:
    return ToolCall(
        span_id=f"{n:016x}", tool="find_users", upstream="helpdesk",
        arguments={"team": "support"}, arguments_error=None, raw_arguments=None,
        is_error=False, error_type=None, blocked_rule=None, annotations=None,
        start_ns=n, end_ns=n + 1,
    )  # fmt: skip


def test_a_loop_is_a_table_of_what_was_made_allowed_and_charged() -> None:
    spec = InvocationSpec(calls=[ExpectedCall(tool="find_users", arguments={"team": "support"})])
    value, passed, evidence = evaluate_calls(spec, [_call(n) for n in range(1, 14)], 2)
    assert passed is False and evidence["repeated"]  # the scorer's own evidence
    score = ScoreRow(run_id="r", component="invocation", value=value, passed=passed,
                     evidence=evidence, scorer="invocation", scorer_version=6)  # fmt: skip
    shown = component_evidence(score, None, lambda _: None)
    (table,) = [t for t in shown.tables if "identical calls" in t.caption]
    assert table.head == ("tool", "made", "allowed", "charged")
    (row,) = table.rows
    assert [c.text for c in row.cells] == ["find_users", "13×", "2×", "11 calls"]
    assert row.ok is False and row.spans == [f"{3:016x}", f"{13:016x}"]  # first and last charged
    assert all(t.caption != "other evidence" for t in shown.tables)  # nothing left as raw JSON
    assert ("max repeats", "2") not in shown.facts  # said once, in the table
