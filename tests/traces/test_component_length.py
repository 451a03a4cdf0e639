"""Migration c5e7a2d94b31 widens the component columns of scores and verdicts from 32 to 128
characters, on real SQLite and real PostgreSQL, keeping the rows, the unique constraint and
the indexes; the scorer registry's limit is the column's."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import DataError, IntegrityError
from sqlmodel import select

from tracecard.scorers.registry import MAX_COMPONENT_LENGTH
from tracecard.traces.migrate import upgrade
from tracecard.traces.models import COMPONENT_MAX_LENGTH, ScoreRow, VerdictRow
from tracecard.traces.store import Store

BEFORE = "b3f1c0de9a17"  # the revision before the widening


def _score(component: str, run_id: str = "r" * 32) -> ScoreRow:
    return ScoreRow(
        run_id=run_id, component=component, value=1.0, passed=True, scorer="s", scorer_version="1"
    )


def _lengths(store: Store, table: str) -> int | None:
    columns = {c["name"]: c for c in inspect(store.engine).get_columns(table)}
    return getattr(columns["component"]["type"], "length", None)


def test_the_registry_limit_is_the_columns() -> None:
    assert MAX_COMPONENT_LENGTH == COMPONENT_MAX_LENGTH == 128


def test_component_columns_widen_and_keep_rows_constraint_and_indexes(db_url: str) -> None:
    store = Store(db_url)
    try:
        upgrade(store, BEFORE)
        short = "c" * 32
        store.add_all([_score(short), VerdictRow(run_id="r" * 32, component=short, agree=True)])
        assert _lengths(store, "scores") == 32 and _lengths(store, "verdicts") == 32
        if store.engine.dialect.name == "postgresql":
            with pytest.raises(DataError):  # what a 33-character component met before
                store.add_all([_score("c" * 33)])

        upgrade(store)
        assert _lengths(store, "scores") == 128 and _lengths(store, "verdicts") == 128
        longest = "L" * COMPONENT_MAX_LENGTH
        store.add_all(
            [_score(longest), VerdictRow(run_id="r" * 32, component=longest, agree=False)]
        )
        with store.session() as session:
            scores = sorted(r.component for r in session.exec(select(ScoreRow)))
            verdicts = sorted((r.component, r.agree) for r in session.exec(select(VerdictRow)))
        assert scores == [longest, short]  # the row from before the migration is kept
        assert verdicts == [(longest, False), (short, True)]

        with pytest.raises(IntegrityError):  # one score per run and component, still
            store.add_all([_score(longest)])
        indexes = {i["name"] for i in inspect(store.engine).get_indexes("scores")}
        assert "ix_scores_component_passed_run" in indexes
        verdict_indexes = {i["name"] for i in inspect(store.engine).get_indexes("verdicts")}
        assert "ix_verdicts_run" in verdict_indexes
    finally:
        store.dispose()


def test_the_migration_downgrades_when_no_name_is_longer(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.create_schema()
        store.add_all([_score("outcome")])
        from alembic import command

        from tracecard.traces.migrate import alembic_config

        config = alembic_config()
        with store.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, BEFORE)
        assert _lengths(store, "scores") == 32
        upgrade(store)
        assert _lengths(store, "scores") == 128
        with store.session() as session:
            assert [r.component for r in session.exec(select(ScoreRow))] == ["outcome"]
    finally:
        store.dispose()
