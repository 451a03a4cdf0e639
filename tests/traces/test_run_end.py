"""Ending a run (`end_run`, what a session's DELETE and `POST /api/runs/{id}/finish` do): its
summary is counted from its spans and written in one UPDATE on the row already read, the row
returned is the row stored, and the search document is built from it; for several runs at once
each gets its own figures. On real SQLite and real PostgreSQL (the `store` fixture)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import text

from tracecard.traces import semconv
from tracecard.traces.models import RunRow
from tracecard.traces.run_summary import end_run, summarize_runs
from tracecard.traces.search import index_runs
from tracecard.traces.store import Store


def _span(run: RunRow, name: str, start_ns: int, **attributes: Any) -> dict[str, Any]:
    return {
        "trace_id": run.trace_id,
        "span_id": secrets.token_hex(8),
        "parent_span_id": run.root_span_id,
        "name": name,
        "kind": 2,
        "start_time_unix_nano": start_ns,
        "end_time_unix_nano": start_ns + 2_000_000,
        "status": {"code": 0, "message": None},
        "attributes": {semconv.RUN_ID: run.id, semconv.ROLE: semconv.ROLE_AGENT, **attributes},
        "events": [],
        "resource": {},
        "scope": "tracecard",
        "run_id": run.id,
    }


def _run_with_calls(store: Store, tools: list[str], upstream: str, failing: int = 0) -> RunRow:
    run = store.add_run(
        RunRow(
            id=secrets.token_hex(16),
            trace_id=secrets.token_hex(16),
            root_span_id=secrets.token_hex(8),
            status="running",
            adhoc_key=f"session:{secrets.token_hex(4)}",
        )
    )
    start = time.time_ns()
    params = '{"clientInfo": {"name": "bench-agent", "version": "2.1"}}'
    spans = [_span(run, "initialize", start, **{semconv.RPC_PARAMS: params})]
    for index, tool in enumerate(tools):
        attributes: dict[str, Any] = {
            semconv.GEN_AI_TOOL_NAME: tool,
            semconv.UPSTREAM: upstream,
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: f'{{"ticket": "T-{index}"}}',
        }
        if index < failing:
            attributes[semconv.ERROR_TYPE] = "tool_error"
        spans.append(
            _span(run, f"tools/call {tool}", start + (index + 1) * 10_000_000, **attributes)
        )
    store.insert_spans(spans)
    return run


def test_ending_writes_the_summary_and_returns_the_row_as_stored(store: Store) -> None:
    run = _run_with_calls(store, ["lookup", "refund", "lookup"], "helpdesk", failing=1)
    ended = end_run(store, run.id, None, finish=True, status="finished", end_reason="deleted")
    assert ended is not None
    row, summary = ended
    assert (summary.calls, summary.errors, summary.upstreams) == (3, 1, ["helpdesk"])
    stored = store.get_run(run.id)
    assert stored is not None
    for got in (row, stored):
        assert (got.status, got.end_reason, got.calls, got.errors) == ("finished", "deleted", 3, 1)
        assert got.upstreams == ["helpdesk"]
        assert got.client == "bench-agent/2.1"  # from the initialize span's clientInfo
        assert got.duration_ms == 32  # first span's start to the last one's end
        assert got.finished_at is not None and got.started_at is not None
    assert row.finished_at == stored.finished_at


def test_the_client_the_proxy_saw_wins_and_a_missing_run_is_none(store: Store) -> None:
    run = _run_with_calls(store, ["lookup"], "helpdesk")
    ended = end_run(store, run.id, "claude-code/1.0")
    assert ended is not None and ended[0].client == "claude-code/1.0"
    stored = store.get_run(run.id)
    assert stored is not None and stored.client == "claude-code/1.0" and stored.calls == 1
    assert ended[0].status == "running"  # not finished: only the summary was written
    assert end_run(store, "no-such-run") is None


def test_several_runs_are_summarised_apart(store: Store) -> None:
    first = _run_with_calls(store, ["lookup", "refund"], "helpdesk", failing=2)
    second = _run_with_calls(store, ["search"], "docs")
    idle = store.add_run(
        RunRow(
            id=secrets.token_hex(16),
            trace_id=secrets.token_hex(16),
            root_span_id=secrets.token_hex(8),
        )
    )
    found = summarize_runs(store, [first, second, idle])
    assert (found[first.id].calls, found[first.id].errors) == (2, 2)
    assert (found[second.id].calls, found[second.id].errors) == (1, 0)
    assert found[second.id].upstreams == ["docs"]
    assert (found[idle.id].calls, found[idle.id].first_ns) == (0, None)


def test_one_run_summarised_on_the_driver_is_summarised_as_with_others(store: Store) -> None:
    """A run's end summarises one run on the driver's cursor (`traces/driver_sql.py`); the
    runs list summarises several through SQLAlchemy. Same figures, on both databases."""
    run = _run_with_calls(store, ["lookup", "refund", "lookup"], "helpdesk", failing=2)
    start = time.time_ns()
    chat = _span(
        run,
        "chat gpt-test",
        start + 90_000_000,
        **{
            semconv.ROLE: "model",
            semconv.UPSTREAM: "model-proxy",
            semconv.GEN_AI_USAGE_INPUT_TOKENS: 120,
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 30,
        },
    )
    root = {**_span(run, "invoke_agent adhoc", start - 5_000_000), "span_id": run.root_span_id}
    root["parent_span_id"] = None
    root["end_time_unix_nano"] = start + 500_000_000  # the root is left out of the figures
    store.insert_spans([chat, root])
    other = _run_with_calls(store, ["search"], "docs")
    alone = summarize_runs(store, [run])[run.id]
    together = summarize_runs(store, [run, other])[run.id]
    assert alone == together
    assert (alone.calls, alone.errors, alone.tokens) == (3, 2, 150)
    assert alone.upstreams == ["helpdesk", "model-proxy"]
    assert alone.client == "bench-agent/2.1"
    assert alone.last_ns == chat["end_time_unix_nano"]  # not the root's later end


def test_an_ended_run_is_found_by_its_tool_calls_from_its_row(store: Store) -> None:
    run = _run_with_calls(store, ["escalate_ticket"], "helpdesk")
    ended = end_run(store, run.id, finish=True, status="finished")
    assert ended is not None
    index_runs(store, [ended[0]])  # the row just written, as the server passes it
    assert _ids(store, "escalate_ticket") == {run.id}
    assert _ids(store, "refund") == set()


def test_ending_with_index_writes_the_document_in_the_same_write(store: Store) -> None:
    """What a session's end does: the summary and the search document in one transaction."""
    run = _run_with_calls(store, ["escalate_ticket"], "helpdesk")
    assert _ids(store, "escalate_ticket") == set()
    ended = end_run(store, run.id, finish=True, index=True, status="finished")
    assert ended is not None and ended[0].status == "finished"
    assert _ids(store, "escalate_ticket") == {run.id}
    # ended again (a second DELETE, the idle sweep): still one document, still found
    assert end_run(store, run.id, finish=True, index=True, status="finished") is not None
    assert _ids(store, "escalate_ticket") == {run.id}
    with store.engine.connect() as connection:
        count = connection.execute(text("SELECT count(*) FROM run_search")).scalar_one()
    assert count == 1


def _ids(store: Store, query: str) -> set[str]:
    with store.engine.connect() as connection:
        if store.engine.dialect.name == "postgresql":
            rows = connection.execute(
                text(
                    "SELECT run_id FROM run_search WHERE document @@ plainto_tsquery('simple', :q)"
                ),
                {"q": query},
            )
        else:
            rows = connection.execute(
                text("SELECT run_id FROM run_search WHERE run_search MATCH :q"),
                {"q": f'"{query}"'},
            )
        return {str(row[0]) for row in rows}
