"""The viewer's queries on real SQLite and real PostgreSQL (the `store` fixture runs both)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.viewer.data import build_night
from tracecard.traces import queries, verdicts
from tracecard.traces.models import RunRow
from tracecard.traces.queries import RunFilter
from tracecard.traces.store import Store


def _runs(store: Store, count: int, same_time: int = 0) -> list[RunRow]:
    """`count` runs a second apart; the last `same_time` share one timestamp (ties on id)."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(count):
        moment = base + timedelta(seconds=min(i, count - same_time))
        rows.append(
            RunRow(
                id=f"run{i:05d}",
                status="finished" if i % 3 else "errored",
                task_id=f"task-{i % 4}",
                config_name="a" if i % 2 else "b",
                trace_id=f"{i:032x}",
                root_span_id=f"{i:016x}",
                created_at=moment,
                flags=["unsafe_success"] if i % 5 == 0 else [],
            )
        )
    store.add_all(rows)
    return rows


def _all_pages(store: Store, run_filter: RunFilter | None = None, limit: int = 7) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(100):  # bounded: a cursor bug must not hang the test
        page = queries.list_runs(store, run_filter, cursor=cursor, limit=limit)
        seen.extend(r.id for r in page.runs)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError("pagination did not end")


def test_keyset_pages_cover_every_run_once_newest_first(store: Store) -> None:
    rows = _runs(store, 40, same_time=10)
    ids = _all_pages(store)
    expected = [r.id for r in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)]
    assert ids == expected


def test_filters_combine(store: Store) -> None:
    rows = _runs(store, 30)
    errored_task1 = _all_pages(store, RunFilter(status="errored", task_id="task-1"))
    expected = {r.id for r in rows if r.status == "errored" and r.task_id == "task-1"}
    assert set(errored_task1) == expected and expected
    flagged = _all_pages(store, RunFilter(flag="unsafe_success", config_name="b"))
    assert set(flagged) == {r.id for r in rows if r.flags and r.config_name == "b"}


def test_filters_on_scores_and_spans(store: Store) -> None:
    night = build_night(store)
    last_night = night.experiments["last-night"]
    failed = queries.list_runs(
        store, RunFilter(experiment_id=last_night, failed_component="outcome")
    ).runs
    expected = {night.runs[("last-night", "refund-order", t)] for t in (1, 3)}
    expected |= {night.runs[("last-night", "book-flight", t)] for t in range(5)}
    assert {r.id for r in failed} == expected
    refunds = queries.list_runs(store, RunFilter(tool_name="issue_refund")).runs
    assert len(refunds) == 5 + 4  # every refund-order trial but the one that skipped it
    timeouts = queries.list_runs(store, RunFilter(error_type="timeout")).runs
    assert {r.task_id for r in timeouts} == {"book-flight"} and len(timeouts) == 10


def test_a_foreign_cursor_starts_from_the_top(store: Store) -> None:
    _runs(store, 5)
    assert queries.decode_cursor("not-a-cursor") is None
    assert len(queries.list_runs(store, cursor="not-a-cursor").runs) == 5


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
