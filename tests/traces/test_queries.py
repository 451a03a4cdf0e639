"""The viewer's queries on real SQLite and real PostgreSQL (the `store` fixture runs both)."""

from __future__ import annotations

import pytest

from tests.viewer.data import build_night
from tracecard.traces import queries, verdicts
from tracecard.traces.store import Store


def test_verdicts_and_agreement_per_scorer(store: Store) -> None:
    night = build_night(store)
    run = night.runs[("last-night", "refund-order", 3)]
    other = night.runs[("last-week", "weather", 0)]
    verdicts.add_verdict(store, run, "outcome", True, "right: nothing was refunded", "ada")
    verdicts.add_verdict(store, run, "completion", False, "it claimed a refund", "ada")
    verdicts.add_verdict(store, other, "outcome", False)
    rates = {a.scorer: a for a in verdicts.agreement_rates(store, night.experiments["last-night"])}
    assert (rates["outcome"].n, rates["outcome"].rate) == (1, 1.0)
    assert (rates["completion"].n, rates["completion"].rate) == (1, 0.0)
    everywhere = {a.scorer: a for a in verdicts.agreement_rates(store)}
    assert (everywhere["outcome"].n, everywhere["outcome"].agree) == (2, 1)
    stored = verdicts.verdicts_for_runs(store, [run])[run]
    assert [(v.component, v.agree, v.author) for v in stored] == [
        ("outcome", True, "ada"),
        ("completion", False, "ada"),
    ]
    with pytest.raises(KeyError):
        verdicts.add_verdict(store, "no-such-run", "outcome", True)


def test_experiments_counts_and_choices(store: Store) -> None:
    night = build_night(store)
    listed = queries.list_experiments(store)
    assert [e.config_name for e in listed] == ["last-night", "last-week"]
    counts = queries.experiment_counts(store, list(night.experiments.values()))
    assert counts[night.experiments["last-night"]] == (20, 7)
    assert counts[night.experiments["last-week"]] == (20, 8)
    choices = queries.filter_choices(store)
    assert "refund-order" in choices.tasks and "issue_refund" in choices.tools
    assert choices.error_types == ["timeout", "tool_error"]
    runs = queries.experiment_runs(store, night.experiments["last-night"], "refund-order")
    assert [r.trial for r in runs] == [0, 1, 2, 3, 4]


def test_trace_outline_joins_agent_spans_by_trace_and_leaves_payloads_out(store: Store) -> None:
    night = build_night(store)
    run = store.get_run(night.runs[("last-night", "refund-order", 0)])
    assert run is not None
    agent_span = {
        "trace_id": run.trace_id,
        "span_id": "a" * 16,
        "parent_span_id": run.root_span_id,
        "name": "chat gpt-4.1",
        "start_time_unix_nano": 1,
        "end_time_unix_nano": 2,
        "attributes": {"gen_ai.request.model": "gpt-4.1"},  # no tracecard.run.id
        "resource": {"service.name": "my-agent"},
    }
    store.insert_spans([agent_span])
    outline = queries.trace_outline(store, run)
    full = store.spans_for_run(run.id)
    assert [s["span_id"] for s in outline] == [s["span_id"] for s in full]
    assert outline[0]["span_id"] == "a" * 16 and outline[0]["resource"] == {
        "service.name": "my-agent"
    }
    call = next(s for s in outline if s["name"] == "tools/call issue_refund")
    assert call["attributes"] == {"gen_ai.tool.name": "issue_refund", "tracecard.role": "agent"}


def test_trace_outline_carries_the_agent_reported_mark_only(store: Store) -> None:
    """The waterfall's `agent-reported` chip: the outline reads `tracecard.evidence` of the
    agent's own spans, and still no payload."""
    night = build_night(store)
    run = store.get_run(night.runs[("last-night", "refund-order", 0)])
    assert run is not None
    claim = {
        "trace_id": run.trace_id,
        "span_id": "c" * 16,
        "parent_span_id": run.root_span_id,
        "name": "execute_tool issue_refund",
        "start_time_unix_nano": 1,
        "end_time_unix_nano": 2,
        "attributes": {
            "gen_ai.tool.name": "issue_refund",
            "gen_ai.tool.call.arguments": '{"order": 1}',
            "tracecard.evidence": "agent_reported",
        },
        "resource": {"service.name": "my-agent"},
    }
    store.insert_spans([claim])
    outline = {s["span_id"]: s for s in queries.trace_outline(store, run)}
    assert outline["c" * 16]["attributes"] == {
        "gen_ai.tool.name": "issue_refund",
        "tracecard.evidence": "agent_reported",
    }
    assert not any(
        "tracecard.evidence" in s["attributes"] for k, s in outline.items() if k != "c" * 16
    )


def test_trace_outline_carries_events_only_where_a_span_has_some(store: Store) -> None:
    """Every bar of the waterfall ticks its span's events: the outline reads them (and only
    for spans that have some), with times as recorded, a wrapped year-2262+ time included."""
    night = build_night(store)
    run = store.get_run(night.runs[("last-night", "refund-order", 0)])
    assert run is not None
    late = 2**63 + 5  # stored wrapped to a negative BIGINT
    ticked = {
        "trace_id": run.trace_id,
        "span_id": "e" * 16,
        "parent_span_id": run.root_span_id,
        "name": "agent step",
        "start_time_unix_nano": late,
        "end_time_unix_nano": late + 10,
        "events": [{"name": "retry", "time_unix_nano": late + 4, "attributes": {"n": 1}}],
    }
    store.insert_spans([ticked])
    outline = {s["span_id"]: s for s in queries.trace_outline(store, run)}
    span = outline["e" * 16]
    assert span["start_time_unix_nano"] == late and span["end_time_unix_nano"] == late + 10
    assert [(e["name"], e["time_unix_nano"]) for e in span["events"]] == [("retry", late + 4)]
    assert list(outline)[-1] == "e" * 16  # ordered by its true time
    full = {s["span_id"]: s for s in store.spans_for_run(run.id)}
    for span_id, found in outline.items():
        if span_id != "e" * 16:
            assert found.get("events", []) == (full[span_id].get("events") or []), span_id
