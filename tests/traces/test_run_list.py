"""The runs list's query (filters, verdicts, search, sorting, totals, keyset pages) on real
SQLite and real PostgreSQL (the `store` fixture runs both)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.viewer.data import build_night
from tracecard.traces import run_list
from tracecard.traces.models import RunRow
from tracecard.traces.run_list import RunQuery, find_runs
from tracecard.traces.search import index_runs, parse_terms
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
                calls=i % 7,
                duration_ms=(i * 37) % 11,
            )
        )
    store.add_all(rows)
    return rows


def _all_pages(store: Store, query: RunQuery | None = None, limit: int = 7) -> list[str]:
    seen: list[str] = []
    cursor = None
    query = query or RunQuery()
    for _ in range(100):  # bounded: a cursor bug must not hang the test
        page = find_runs(store, query, cursor=cursor, limit=limit)
        assert page.total >= len(page.runs)
        seen.extend(r.id for r in page.runs)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError("pagination did not end")


def test_keyset_pages_cover_every_run_once_in_each_order(store: Store) -> None:
    rows = _runs(store, 40, same_time=10)
    assert _all_pages(store) == [
        r.id for r in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)
    ]
    for sort, column in (("calls", "calls"), ("duration", "duration_ms")):
        for descending in (True, False):
            ids = _all_pages(store, RunQuery(sort=sort, descending=descending))
            key = sorted(rows, key=lambda r: (getattr(r, column), r.id), reverse=descending)
            assert ids == [r.id for r in key], (sort, descending)
    assert find_runs(store, RunQuery()).total == 40


def test_filters_combine_and_text_filters_match_a_prefix(store: Store) -> None:
    rows = _runs(store, 30)
    errored = _all_pages(store, RunQuery(status="errored", task="task-1"))
    expected = {r.id for r in rows if r.status == "errored" and r.task_id == "task-1"}
    assert set(errored) == expected and expected
    assert find_runs(store, RunQuery(status="errored", task="task-1")).total == len(expected)
    flagged = _all_pages(store, RunQuery(flag="unsafe_success", config="b"))
    assert set(flagged) == {r.id for r in rows if r.flags and r.config_name == "b"}
    assert len(_all_pages(store, RunQuery(task="task"))) == 30  # a prefix, not the whole name
    assert _all_pages(store, RunQuery(task="ask")) == []
    since = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    window = _all_pages(store, RunQuery(since=since, until=since + timedelta(seconds=5)))
    assert sorted(window) == [f"run{i:05d}" for i in range(10, 15)]


def test_verdicts_components_tools_and_errors(store: Store) -> None:
    night = build_night(store)
    last_night = night.experiments["last-night"]
    failed = find_runs(store, RunQuery(experiment=last_night, component="outcome")).runs
    expected = {night.runs[("last-night", "refund-order", t)] for t in (1, 3)}
    expected |= {night.runs[("last-night", "book-flight", t)] for t in range(5)}
    assert {r.id for r in failed} == expected
    # `status=failed` is the verdict: any component failed, in a run that did not error
    any_failed = set(_all_pages(store, RunQuery(status="failed", experiment=last_night)))
    assert any_failed == {
        run_id
        for (experiment, _task, _trial), run_id in night.runs.items()
        if experiment == "last-night"
        and any(c.passed is False for c in night.scores[run_id].components)
    }
    assert expected <= any_failed
    passed = set(_all_pages(store, RunQuery(status="passed", experiment=last_night)))
    assert passed and not passed & any_failed
    refunds = find_runs(store, RunQuery(tool="issue_ref")).runs  # a prefix of issue_refund
    assert len(refunds) == 5 + 4  # every refund-order trial but the one that skipped it
    timeouts = find_runs(store, RunQuery(error="time")).runs
    assert {r.task_id for r in timeouts} == {"book-flight"} and len(timeouts) == 10


def test_search_finds_a_run_by_a_word_in_a_tool_result(store: Store) -> None:
    night = build_night(store)
    index_runs(store, list(night.runs.values()))  # what the server does when a run ends
    # "Ship the viewer on Friday." is what read_file returned in the `files.good` runs only
    good = {night.runs[("last-week", "list-files", t)] for t in (0, 3)}
    good |= {night.runs[("last-night", "list-files", t)] for t in range(5)}
    found = find_runs(store, RunQuery(text="friday"))
    assert {r.id for r in found.runs} == good and found.total == 7
    assert {r.id for r in find_runs(store, RunQuery(text="Frid*")).runs} == good
    paged = _all_pages(store, RunQuery(text="friday"), limit=2)  # cursors through the search
    newest_first = sorted(
        (store.get_run(r) for r in good), key=lambda r: (r.created_at, r.id), reverse=True  # type: ignore[union-attr]
    )
    assert paged == [r.id for r in newest_first]  # type: ignore[union-attr]
    assert len(_all_pages(store, RunQuery(text="friday", sort="calls"), limit=3)) == 7
    assert {r.id for r in find_runs(store, RunQuery(text='"on friday" ship')).runs} == good
    assert find_runs(store, RunQuery(text='"friday on"')).total == 0  # a phrase keeps its order
    # a word of a final answer; search combines with the other filters
    run_id = night.runs[("last-night", "weather", 2)]
    store.update_run(run_id, final_answer="Drizzle expected over Zanzibarville tonight.")
    index_runs(store, [run_id])
    assert [r.id for r in find_runs(store, RunQuery(text="zanzibarville")).runs] == [run_id]
    both = RunQuery(text="friday", experiment=night.experiments["last-week"])
    assert find_runs(store, both).total == 2
    assert find_runs(store, RunQuery(text="no-such-word-anywhere")).runs == []
    assert find_runs(store, RunQuery(text='"; DROP TABLE runs; --')).runs == []
    assert find_runs(store, RunQuery()).total > 7  # the runs table is still there


def test_search_terms() -> None:
    assert parse_terms('refund "order 7" escal*') == [
        (["refund"], False),
        (["order", "7"], False),
        (["escal"], True),
    ]
    assert parse_terms("  '; --  ") == []


def test_a_search_among_other_filters_is_counted_within_a_budget(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Search plus another filter counts the other filter among at most SEARCH_COUNT_BUDGET
    matching documents on both databases (PostgreSQL joined every match: 410 ms at 1,000,000
    runs), and says the total is not exact when there were more matches than that."""
    night = build_night(store)
    index_runs(store, list(night.runs.values()))
    both = RunQuery(text="friday", experiment=night.experiments["last-night"])  # 5 of 7 matches
    whole = find_runs(store, both)
    assert (whole.total, whole.exact, len(whole.runs)) == (5, True, 5)
    monkeypatch.setattr(run_list, "SEARCH_COUNT_BUDGET", 3)
    budgeted = find_runs(store, both)
    assert len(budgeted.runs) == 5  # the page itself is never cut by the budget
    assert budgeted.total <= 3 and budgeted.exact is False  # "at least", never more than seen
