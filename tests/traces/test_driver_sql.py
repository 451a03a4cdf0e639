"""`DriverStatement`: a Core statement compiled once and run on the driver's cursor gives the
rows SQLAlchemy's execution gives, with the statement's fixed parameters processed by their
types (a JSON path on SQLite, a key on PostgreSQL); an IN, whose SQL SQLAlchemy renders at each
execution, is refused. On real SQLite and real PostgreSQL (the `store` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, func, select, text, update

from tests.traces.test_run_end import _run_with_calls
from tracecard.traces import semconv
from tracecard.traces.driver_sql import DriverStatement
from tracecard.traces.models import SpanRow
from tracecard.traces.search import DOCUMENT_MAX_CHARS, index_runs, search_document
from tracecard.traces.store import Store


def test_the_driver_gives_the_rows_sqlalchemy_gives(store: Store) -> None:
    run = _run_with_calls(store, ["lookup", "refund"], "helpdesk", failing=1)
    spans: Any = SpanRow
    query = (
        select(spans.name, spans.attributes[semconv.UPSTREAM].as_string(), spans.error_type)
        .where(spans.run_id == bindparam("id"), spans.name.like("tools/call %"))
        .order_by(spans.start_ns)
    )
    driver = DriverStatement(query, store.engine.dialect, {"id"})
    with store.engine.connect() as connection:
        expected = [tuple(row) for row in connection.execute(query, {"id": run.id})]
        got = driver.rows(connection, id=run.id, unused="ignored")
        assert driver.rows(connection, id="no-such-run") == []
    assert got == expected
    assert got == [
        ("tools/call lookup", "helpdesk", "tool_error"),
        ("tools/call refund", "helpdesk", None),
    ]


def test_an_in_is_refused(store: Store) -> None:
    spans: Any = SpanRow
    query = select(spans.name).where(spans.name.in_(("initialize", "tools/list")))
    with pytest.raises(ValueError, match="IN"):
        DriverStatement(query, store.engine.dialect, set())


def test_search_documents_on_the_driver(store: Store) -> None:
    """The document of a run is read on the driver's cursor, up to `DOCUMENT_MAX_CHARS`, and
    runs created in one microsecond (one FTS5 row range on SQLite) keep a document each."""
    created = datetime.now(UTC)
    runs = []
    for word in ("alpha", "beta"):
        run = _run_with_calls(store, [f"{word}_tool"], "helpdesk")
        runs.append(run)
        assert store.write_run(run.id, {"created_at": created})
    big = _run_with_calls(store, ["bulk_tool"] * 3, "helpdesk")
    with store.engine.begin() as connection:
        connection.execute(
            update(SpanRow)
            .where(SpanRow.run_id == big.id)  # type: ignore[arg-type]
            .values(attributes=func.json_object(semconv.GEN_AI_TOOL_CALL_RESULT, "x" * 90_000))
            if store.engine.dialect.name == "sqlite"
            else update(SpanRow)
            .where(SpanRow.run_id == big.id)  # type: ignore[arg-type]
            .values(
                attributes=func.json_build_object(semconv.GEN_AI_TOOL_CALL_RESULT, "x" * 90_000)
            )
        )
    document = search_document(store, big)
    assert len(document) == DOCUMENT_MAX_CHARS  # three results of 90,000, cut at the bound
    index_runs(store, [run.id for run in runs])
    with store.engine.connect() as connection:
        owners = connection.execute(text("SELECT run_id FROM run_search")).scalars().all()
    assert sorted(owners) == sorted(run.id for run in runs)
    for run, word in zip(runs, ("alpha", "beta"), strict=True):
        assert f"{word}_tool" in search_document(store, run)
