"""The storage round trip on real SQLite and real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracecard.traces.exporter import SqlSpanExporter
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store


def _span(span_id: str, start: int, parent: str | None = None, **attributes: object) -> dict:
    return {
        "trace_id": "ab" * 16,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": "tools/call echo",
        "kind": 3,
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + 10,
        "status": {"code": 0, "message": None},
        "attributes": {"tracecard.run.id": "r1", **attributes},
        "events": [{"name": "e", "time_unix_nano": start + 1, "attributes": {"k": 1}}],
    }


def test_spans_round_trip_in_start_order_and_idempotent(store: Store) -> None:
    store.add_run(RunRow(id="r1", trace_id="ab" * 16, root_span_id="00" * 8))
    # the child arrives before its parent: no foreign key on the parent
    child = _span("2" * 16, 200, parent="1" * 16, **{"gen_ai.tool.name": "echo", "n": 1.5})
    parent = _span("1" * 16, 100)
    assert store.insert_spans([child]) == 1
    store.insert_spans([parent, child])  # the repeated child is ignored, not an error
    spans = store.spans_for_run("r1")
    assert [s["span_id"] for s in spans] == ["1" * 16, "2" * 16]
    assert spans[1]["parent_span_id"] == "1" * 16
    assert spans[1]["attributes"]["gen_ai.tool.name"] == "echo"
    assert spans[1]["attributes"]["n"] == 1.5
    assert spans[1]["events"][0]["attributes"] == {"k": 1}
    assert spans[0]["end_time_unix_nano"] == 110


def test_spans_without_run_attribute_join_by_trace_id(store: Store) -> None:
    store.add_run(RunRow(id="r2", trace_id="cd" * 16, root_span_id="00" * 8))
    span = _span("3" * 16, 5)
    span["trace_id"] = "cd" * 16
    span["attributes"] = {"gen_ai.operation.name": "chat"}
    store.insert_spans([span])
    assert [s["span_id"] for s in store.spans_for_run("r2")] == ["3" * 16]


def test_sdk_exporter_writes_one_batch(store: Store) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SqlSpanExporter(store)))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("outer", attributes={"tracecard.run.id": "r3"}):
        with tracer.start_as_current_span("inner", attributes={"tracecard.run.id": "r3"}):
            pass
    provider.shutdown()
    spans = store.spans_for_run("r3")
    assert {s["name"] for s in spans} == {"outer", "inner"}
    inner = next(s for s in spans if s["name"] == "inner")
    outer = next(s for s in spans if s["name"] == "outer")
    assert inner["parent_span_id"] == outer["span_id"]
    assert len(inner["trace_id"]) == 32 and len(inner["span_id"]) == 16


def test_run_update_and_lookup(store: Store) -> None:
    store.add_run(RunRow(id="r4", trace_id="ef" * 16, root_span_id="11" * 8, adhoc_key="sess"))
    store.update_run("r4", status="finished", final_answer="done")
    run = store.get_run("r4")
    assert run is not None and run.status == "finished" and run.final_answer == "done"
    assert store.run_for_trace("ef" * 16).id == "r4"  # type: ignore[union-attr]
    assert store.adhoc_run("sess").id == "r4"  # type: ignore[union-attr]
    assert store.get_run("missing") is None


def test_the_in_memory_double_is_one_database_for_every_thread(memory_store: Store) -> None:
    """`sqlite://` serves unit tests: what the exporter's thread writes, the caller reads."""
    import threading

    writer = threading.Thread(
        target=lambda: (
            memory_store.add_run(RunRow(id="r1", trace_id="ab" * 16, root_span_id="00" * 8)),
            memory_store.insert_spans([_span("1" * 16, 100)]),
        )
    )
    writer.start()
    writer.join(10)
    assert [s["span_id"] for s in memory_store.spans_for_run("r1")] == ["1" * 16]
    assert Store("sqlite://").url == "sqlite://"  # a second double is a second database


def test_sqlite_checkpoints_the_wal_every_10000_pages(tmp_path: Path) -> None:
    # a 1,000-span commit dirties hundreds of span-id index pages: a checkpoint at SQLite's
    # default 1,000 pages wrote them back at almost every commit (docs/PERFORMANCE.md)
    store = Store(f"sqlite:///{tmp_path / 'tracecard.db'}")
    try:
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 10000
    finally:
        store.dispose()


def test_insert_rows_hold_each_column_of_the_span() -> None:
    # the insert path builds its rows directly (the hot path), in `_SPAN_COLUMNS` order
    from tracecard.traces.span_rows import _SPAN_COLUMNS, span_rows, span_values

    resource = {"service.name": "agent"}
    tool = _span("3" * 16, 300, parent="", **{"gen_ai.tool.name": 7, "tracecard.role": "agent"})
    tool.update(resource=resource, scope="s", events=[])
    failed = _span("4" * 16, 400, **{"error.type": "timeout"})
    failed.update(end_time_unix_nano=None, status={"code": 2, "message": "boom"}, kind=None)
    failed.update(links=[{"trace_id": "cd" * 16, "span_id": "5" * 16}], resource=resource)
    bare = {"span_id": "6" * 16, "trace_id": "ef" * 16, "run_id": "r9", "attributes": {}}
    late = _span("7" * 16, (1 << 64) - 20)  # past 2^63: stored as a negative BIGINT
    attributes = '{"tracecard.run.id":"r1","gen_ai.tool.name":7,"tracecard.role":"agent"}'
    event = '[{"name":"e","time_unix_nano":401,"attributes":{"k":1}}]'
    link = '[{"trace_id":"' + "cd" * 16 + '","span_id":"' + "5" * 16 + '"}]'
    agent = '{"service.name":"agent"}'
    assert span_rows([tool, failed, bare, late], clean=False) == [
        (
            "3" * 16,
            "ab" * 16,
            None,
            "r1",
            "tools/call echo",
            3,
            300,
            310,
            0,
            None,
            "7",
            None,
            "agent",
            attributes,
            "[]",
            agent,
            "s",
            "[]",
        ),
        (
            "4" * 16,
            "ab" * 16,
            None,
            "r1",
            "tools/call echo",
            0,
            400,
            None,
            2,
            "boom",
            None,
            "timeout",
            None,
            '{"tracecard.run.id":"r1","error.type":"timeout"}',
            event,
            agent,
            None,
            link,
        ),
        (
            "6" * 16,
            "ef" * 16,
            None,
            "r9",
            "",
            0,
            0,
            None,
            0,
            None,
            None,
            None,
            None,
            "{}",
            "[]",
            "{}",
            None,
            "[]",
        ),
        (
            "7" * 16,
            "ab" * 16,
            None,
            "r1",
            "tools/call echo",
            3,
            -20,
            -10,
            0,
            None,
            None,
            None,
            None,
            '{"tracecard.run.id":"r1"}',
            event.replace("401", str((1 << 64) - 19)),
            "{}",
            None,
            "[]",
        ),
    ]
    values = span_values(failed)
    assert list(values) == list(_SPAN_COLUMNS)
    assert values["attributes"] == failed["attributes"] and values["links"] == failed["links"]
    assert (values["start_ns"], values["end_ns"], values["tool_name"]) == (400, None, None)
