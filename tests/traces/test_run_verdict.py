"""The run's stored verdict (`runs.score_verdict`): written with its scores, backfilled by its
migration, and the runs list's verdict filters mean exactly what `scorers.verdict.run_verdict`
means, for every status and every mix of scores, on real SQLite and real PostgreSQL."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import MetaData, Table, inspect

from tracecard.scorers.types import RUN_STATUSES
from tracecard.scorers.verdict import VERDICTS, run_verdict, scores_verdict
from tracecard.traces.migrate import upgrade
from tracecard.traces.models import RunRow
from tracecard.traces.run_list import RunQuery, find_runs
from tracecard.traces.store import Store

BEFORE = "d8a41c7e5f20"  # the revision before `score_verdict`
MIXES: list[list[tuple[str, bool | None]]] = [
    [],
    [("outcome", None)],
    [("outcome", True)],
    [("outcome", False)],
    [("invocation", True), ("outcome", False)],
    [("invocation", False), ("outcome", None)],
    [("invocation", None), ("outcome", True)],
]


def _row(run_id: str, component: str, passed: bool | None) -> dict[str, object]:
    return {
        "run_id": run_id,
        "component": component,
        "value": None if passed is None else float(passed),
        "passed": passed,
        "evidence": {"reason": "as planted"},
        "scorer": component,
        "scorer_version": "1",
        "created_at": datetime(2026, 1, 2, tzinfo=UTC),
    }


def _ids(store: Store, query: RunQuery) -> set[str]:
    page = find_runs(store, query, limit=500)
    assert page.next_cursor is None and page.total == len(page.runs)
    return {r.id for r in page.runs}


def test_verdict_filters_mean_what_run_verdict_means(store: Store) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    runs, expected = [], {}
    for n, (status, mix) in enumerate(itertools.product(RUN_STATUSES, MIXES)):
        run_id = f"run{n:04d}"
        runs.append(
            RunRow(
                id=run_id,
                status=status,
                trace_id=f"{n:032x}",
                root_span_id=f"{n:016x}",
                created_at=base + timedelta(seconds=n),
            )
        )
        expected[run_id] = (
            status,
            [SimpleNamespace(component=c, passed=p, evidence={}) for c, p in mix],
        )
    store.add_all(runs)
    # the write path the server uses: scores with what they say, then a rescore that flips one
    store.replace_scores(
        {
            r: [_row(r, s.component, s.passed) for s in scores]
            for r, (_st, scores) in expected.items()
        },
        {},
        {},
        {r: scores_verdict(scores).word for r, (_st, scores) in expected.items()},
    )
    flipped = next(r for r, (st, sc) in expected.items() if st == "finished" and not sc)
    expected[flipped] = (
        "finished",
        [SimpleNamespace(component="outcome", passed=False, evidence={})],
    )
    store.replace_scores({flipped: [_row(flipped, "outcome", False)]}, {}, {}, {flipped: "failed"})
    with pytest.raises(ValueError, match="without a verdict"):
        store.replace_scores({flipped: [_row(flipped, "outcome", True)]}, {}, {}, {})

    for verdict in VERDICTS:
        want = {r for r, (st, sc) in expected.items() if run_verdict(st, sc).word == verdict}
        assert want, verdict  # every verdict is planted
        assert _ids(store, RunQuery(status=verdict)) == want, verdict
    failed_any = {r for r, (_st, sc) in expected.items() if any(s.passed is False for s in sc)}
    assert _ids(store, RunQuery(component="any")) == failed_any
    failed_outcome = {
        r
        for r, (_st, sc) in expected.items()
        if any(s.component == "outcome" and s.passed is False for s in sc)
    }
    assert flipped in failed_outcome
    assert _ids(store, RunQuery(component="outcome")) == failed_outcome


def test_the_migration_backfills_the_verdict_of_stored_runs(db_url: str) -> None:
    store = Store(db_url)
    try:
        upgrade(store, BEFORE)
        tables = MetaData()
        runs = Table("runs", tables, autoload_with=store.engine)
        scores = Table("scores", tables, autoload_with=store.engine)
        assert "score_verdict" not in runs.c
        planted = {
            "r-fail": [("invocation", True), ("outcome", False)],
            "r-pass": [("outcome", True), ("safety", None)],
            "r-none": [("outcome", None)],
            "r-bare": [],
        }
        with store.engine.begin() as connection:
            for n, run_id in enumerate(planted):
                connection.execute(
                    runs.insert().values(
                        id=run_id,
                        trial=0,
                        config_name="c",
                        config={},
                        status="finished",
                        trace_id=f"{n:032x}",
                        root_span_id=f"{n:016x}",
                        flags=[],
                        created_at=datetime(2026, 1, 1, 0, 0, n),
                    )
                )
            rows = [_row(r, c, p) for r, mix in planted.items() for c, p in mix]
            connection.execute(scores.insert(), rows)
        upgrade(store)
        found = {r.id: r.score_verdict for r in find_runs(store, RunQuery()).runs}
        assert found == {
            "r-fail": "failed",
            "r-pass": "passed",
            "r-none": "not_evaluated",
            "r-bare": "not_evaluated",
        }
        assert _ids(store, RunQuery(status="failed")) == {"r-fail"}
        indexes = {i["name"] for i in inspect(store.engine).get_indexes("runs")}
        assert "ix_runs_verdict_created" in indexes
    finally:
        store.dispose()
