"""Migration c2e9a4f7d1b6 makes ix_spans_tool and ix_spans_error partial (only spans that name a
tool or an error: most ingested spans name neither, and each insert paid for two NULL entries),
on real SQLite and real PostgreSQL; the viewer's tool and error filters find the same runs."""

from __future__ import annotations

from sqlalchemy import text

from tracecard.traces.migrate import upgrade
from tracecard.traces.models import RunRow
from tracecard.traces.queries import filter_choices
from tracecard.traces.run_list import RunQuery, find_runs
from tracecard.traces.store import Store

BEFORE = "b8d4f2a6c1e3"  # the revision before the partial indexes


def _span(run_id: str, number: int, **attributes: object) -> dict[str, object]:
    return {
        "trace_id": run_id * 4,
        "span_id": f"{run_id}{number:012x}",
        "name": "span",
        "kind": 1,
        "start_time_unix_nano": 1_000 + number,
        "end_time_unix_nano": 2_000 + number,
        "status": {"code": 0},
        "attributes": {"tracecard.run.id": run_id, **attributes},
        "events": [],
    }


def _definition(store: Store, name: str) -> str:
    with store.engine.connect() as connection:
        if store.engine.dialect.name == "postgresql":
            query = "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
        else:
            query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :name"
        return str(connection.execute(text(query), {"name": name}).scalar_one())


def test_tool_and_error_indexes_hold_only_spans_that_name_one(db_url: str) -> None:
    store = Store(db_url)
    try:
        upgrade(store, BEFORE)  # spans stored before the migration keep being found
        for run_id in ("aaaa", "bbbb"):
            store.add_run(RunRow(id=run_id, trace_id=run_id * 8, root_span_id="00" * 8))
        store.insert_spans(
            [
                _span("aaaa", 1, **{"gen_ai.tool.name": "search", "tracecard.role": "agent"}),
                _span("aaaa", 2, **{"gen_ai.operation.name": "chat"}),
                _span("bbbb", 1, **{"error.type": "timeout"}),
                _span("bbbb", 2),
            ]
        )
        upgrade(store)
        tool = _definition(store, "ix_spans_tool")
        error = _definition(store, "ix_spans_error")
        assert "WHERE" in tool and "tool_name IS NOT NULL" in tool
        assert "WHERE" in error and "error_type IS NOT NULL" in error
        assert [r.id for r in find_runs(store, RunQuery(tool="sea")).runs] == ["aaaa"]
        assert [r.id for r in find_runs(store, RunQuery(error="time")).runs] == ["bbbb"]
        store.insert_spans([_span("bbbb", 3, **{"gen_ai.tool.name": "fetch"})])  # after it
        choices = filter_choices(store)
        assert choices.tools == ["fetch", "search"]
        assert choices.error_types == ["timeout"]
    finally:
        store.dispose()
