"""Spans as the rows of the `spans` table: the driver parameters built from span dicts (JSON
columns encoded once, by orjson), and the statements that insert them, many rows a statement on
SQLite. The store (`tracecard.traces.store`) calls these inside its transactions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection

from tracecard.traces import semconv
from tracecard.traces.engine import json_text
from tracecard.traces.models import nanos_to_db
from tracecard.traces.writes import SpanDict

_SPAN_COLUMNS = (
    "span_id",
    "trace_id",
    "parent_span_id",
    "run_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "status_code",
    "status_message",
    "tool_name",
    "error_type",
    "role",
    "attributes",
    "events",
    "resource",
    "scope",
    "links",
)


def _insert_spans_sql(rows: int, mark: str, verb: str = "INSERT") -> str:
    """`INSERT` of `rows` spans, idempotent on span id only: SQLite's `INSERT OR IGNORE` would
    also skip, silently, a row that breaks NOT NULL (it is then repaired, or dead-lettered, like
    on PostgreSQL). Several rows in one statement: a duplicate id among them is skipped too."""
    one = "(" + ", ".join([mark] * len(_SPAN_COLUMNS)) + ")"
    values = ", ".join([one] * rows)
    columns = ", ".join(_SPAN_COLUMNS)
    return f"{verb} INTO spans ({columns}) VALUES {values} ON CONFLICT (span_id) DO NOTHING"


# spans a statement on SQLite: 55 (990 parameters), within the smallest limit a SQLite build
# has by default (999 before 3.32; 32,766 since)
SQLITE_CHUNK = 999 // len(_SPAN_COLUMNS)
# `OR FAIL`: a row that breaks NOT NULL stops the statement and keeps the rows before it, so
# SQLite needs no statement journal to undo them (with `ABORT`, the default, it keeps one, and
# a 64-row statement spilled it to a temporary file: 1.5x the disk writes). Nothing is kept
# either way: the error rolls the whole transaction back and `write_spans` goes row by row.
_CHUNK_SQL = _insert_spans_sql(SQLITE_CHUNK, "?", "INSERT OR FAIL")
_ROW_SQL = _insert_spans_sql(1, "?")
_PG_ROW_SQL = _insert_spans_sql(1, "%s")  # psycopg: executemany is pipelined already

_TOOL_NAME, _ERROR_TYPE, _ROLE, _RUN_ID = (
    semconv.GEN_AI_TOOL_NAME,
    semconv.ERROR_TYPE,
    semconv.ROLE,
    semconv.RUN_ID,
)


def span_rows(spans: Iterable[SpanDict], clean: bool) -> list[tuple[Any, ...]]:
    """Driver parameters for spans, the JSON columns encoded by orjson (the hot path). Spans of
    one OTLP request share one resource object: it is encoded once, not once per span. Times
    are in their stored (signed) form: the driver path skips the column types. Each row is built
    straight from its span, in `_SPAN_COLUMNS` order (no intermediate tuple: ~0.5 us a span)."""
    resources: dict[int, tuple[Any, str]] = {}
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for span in spans:
        attributes: dict[str, Any] = span.get("attributes") or {}
        status = span.get("status") or {}
        end = span.get("end_time_unix_nano")
        tool = attributes.get(_TOOL_NAME)
        error_type = attributes.get(_ERROR_TYPE)
        role = attributes.get(_ROLE)
        resource = span.get("resource") or {}
        cached = resources.get(id(resource))
        if cached is None or cached[0] is not resource:
            cached = resources[id(resource)] = (resource, json_text(resource, clean))
        events = span.get("events") or []
        links = span.get("links") or []
        append(
            (
                span["span_id"],
                span["trace_id"],
                span.get("parent_span_id") or None,
                span.get("run_id") or attributes.get(_RUN_ID),
                span.get("name") or "",
                int(span.get("kind") or 0),
                nanos_to_db(int(span.get("start_time_unix_nano") or 0)),
                nanos_to_db(int(end)) if end is not None else None,
                int(status.get("code") or 0),
                status.get("message"),
                str(tool) if tool is not None else None,
                str(error_type) if error_type is not None else None,
                str(role) if role is not None else None,
                json_text(attributes, clean),
                json_text(events, clean) if events else "[]",
                cached[1],
                span.get("scope"),
                json_text(links, clean) if links else "[]",
            )
        )
    return rows


def span_values(span: SpanDict) -> dict[str, Any]:
    """Column values for a span dict in the API shape (the inverse of `span_row_to_dict`)."""
    values = dict(zip(_SPAN_COLUMNS, span_rows([span], clean=False)[0], strict=True))
    values["start_ns"] = span.get("start_time_unix_nano") or 0  # the column types convert
    values["end_ns"] = span.get("end_time_unix_nano")
    values["attributes"] = span.get("attributes") or {}
    values["events"] = span.get("events") or []
    values["resource"] = span.get("resource") or {}
    values["links"] = span.get("links") or []
    return values


def insert_rows(connection: Connection, rows: list[tuple[Any, ...]], sqlite: bool) -> None:
    """Insert `rows` (from `span_rows`) in the caller's transaction.

    SQLite: whole chunks of rows in one statement each, the rest row by row. pysqlite releases
    the GIL around every `sqlite3_step`: once a row under `executemany`, each time taken back
    from the event loop's thread; a statement of `SQLITE_CHUNK` rows is one step. SQLite's own
    work is less too (one statement's setup a chunk, not a row)."""
    if not sqlite:
        connection.exec_driver_sql(_PG_ROW_SQL, rows)
        return
    whole = len(rows) - len(rows) % SQLITE_CHUNK
    for start in range(0, whole, SQLITE_CHUNK):
        flat: list[Any] = []
        for row in rows[start : start + SQLITE_CHUNK]:
            flat += row
        connection.exec_driver_sql(_CHUNK_SQL, tuple(flat))
    if whole < len(rows):
        connection.exec_driver_sql(_ROW_SQL, rows[whole:])
