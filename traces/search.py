"""Full-text search over runs: one document per run (its tool names, arguments, results and
final answer), written when the run ends; SQLite FTS5 or PostgreSQL `tsvector` + GIN.

Search syntax (docs/viewer.md): words must all occur (`refund escalate`); `"two words"` must
occur together; `escal*` matches a word's beginning. Anything but letters and digits separates
words, as the index splits them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import Connection, Dialect, Select, String, bindparam, column, select, text
from sqlalchemy.sql.elements import ColumnElement

from tracecard.traces import semconv
from tracecard.traces.driver_sql import DriverStatement
from tracecard.traces.models import RunRow, SpanRow
from tracecard.traces.store import Store

__all__ = [
    "DOCUMENT_MAX_CHARS",
    "SLOTS",
    "fts_expression",
    "index_runs",
    "matching",
    "newest_matches",
    "parse_terms",
    "search_document",
    "time_rowid",
    "ts_query",
    "write_documents",
]

DOCUMENT_MAX_CHARS = 200_000  # of one run's document; the rest is not searchable
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w+", re.UNICODE)


SLOTS = 8  # FTS5 rows per microsecond of creation time (runs created in the same one)


def time_rowid(created: datetime) -> int:
    """The first FTS5 row of a run created at `created`: rows are in creation order, so the
    newest matches are read first and a page stops reading once it is full."""
    moment = created if created.tzinfo is not None else created.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000) * SLOTS


@cache
def _document_query() -> Select[Any]:
    """A run's tool calls in order (built once: building it cost more than running it)."""
    spans: Any = SpanRow
    return (
        select(
            spans.tool_name,
            spans.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS].as_string(),
            spans.attributes[semconv.GEN_AI_TOOL_CALL_RESULT].as_string(),
        )
        .where(spans.run_id == bindparam("run"), spans.tool_name.is_not(None))
        .order_by(spans.start_ns)
    )


@lru_cache(maxsize=16)  # (per engine's dialect)
def _document_rows(dialect: Dialect) -> DriverStatement:
    """`_document_query` on the driver's cursor (`traces/driver_sql.py`): run with every run's
    end, where SQLAlchemy's execution cost more than the query."""
    return DriverStatement(_document_query(), dialect, {"run"})


@lru_cache(maxsize=16)  # (per engine's dialect)
def _sqlite_writes(dialect: Dialect) -> tuple[DriverStatement, DriverStatement, DriverStatement]:
    """The SQLite document writes (the rows a run's creation time owns, delete, insert)."""
    return (
        DriverStatement(
            text("SELECT rowid, run_id FROM run_search WHERE rowid >= :low AND rowid < :high"),
            dialect,
            {"low", "high"},
        ),
        DriverStatement(text("DELETE FROM run_search WHERE rowid = :row"), dialect, {"row"}),
        DriverStatement(
            text("INSERT INTO run_search (rowid, run_id, body) VALUES (:row, :run, :body)"),
            dialect,
            {"row", "run", "body"},
        ),
    )


def search_document(store: Store, run: RunRow, connection: Connection | None = None) -> str:
    """What a run is found by: each agent tool call's name, arguments and result, and the
    final answer (read on `connection` if given)."""
    if connection is None:
        with store.engine.connect() as connection:
            return search_document(store, run, connection)
    parts: list[str] = []
    size = 0
    rows = _document_rows(connection.dialect).iterate(connection, run=run.id)
    with closing(rows):  # (stopping early closes the cursor now)
        for name, arguments, result in rows:
            for part in (name, arguments, result):
                if part:
                    parts.append(str(part))
                    size += len(parts[-1])
            if size > DOCUMENT_MAX_CHARS:
                break
    if run.final_answer:
        parts.append(run.final_answer)
    return "\n".join(parts)[:DOCUMENT_MAX_CHARS].replace("\x00", " ")


def index_runs(store: Store, runs: Sequence[str | RunRow]) -> None:
    """(Re)write the search documents of these runs (ids, or rows already read: a run that has
    just been ended and returned its row is not read again)."""
    documents = []
    for given in runs:
        run = store.get_run(given) if isinstance(given, str) else given
        if run is not None:
            documents.append((run.id, run.created_at, search_document(store, run)))
    write_documents(store, documents)


def write_documents(
    store: Store,
    documents: Sequence[tuple[str, datetime, str]],
    connection: Connection | None = None,
) -> None:
    """Store (run id, created at, document text), replacing a run's earlier document; in
    `connection`'s transaction if given (it holds the writer lock: `Store.write_connection`)."""
    if not documents:
        return
    if connection is None:
        with store.write_connection() as connection:
            write_documents(store, documents, connection)
        return
    if store.engine.dialect.name == "postgresql":
        connection.execute(
            text(
                "INSERT INTO run_search (run_id, document) "
                "VALUES (:run, to_tsvector('simple', :body)) "
                "ON CONFLICT (run_id) DO UPDATE SET document = excluded.document"
            ),
            [{"run": r, "body": body} for r, _created, body in documents],
        )
        return
    taken, remove, insert = _sqlite_writes(connection.dialect)
    for run_id, created, body in documents:
        low = time_rowid(created)
        used: dict[int, str] = dict(taken.rows(connection, low=low, high=low + SLOTS))
        mine = [row for row, owner in used.items() if owner == run_id]
        free = [row for row in range(low, low + SLOTS) if row not in used]
        row = mine[0] if mine else free[0] if free else None
        if row is None:  # more than SLOTS runs in one microsecond: share the last row
            row = low + SLOTS - 1
        remove.rows(connection, row=row)
        insert.rows(connection, row=row, run=run_id, body=body)


def parse_terms(query: str) -> list[tuple[list[str], bool]]:
    """The query's terms: (words, prefix?) each; a quoted phrase is one term of several words."""
    terms: list[tuple[list[str], bool]] = []
    for phrase, word in _TERM.findall(query):
        raw = phrase if phrase else word
        words = [w.lower() for w in _WORD.findall(raw)]
        if not words:
            continue
        prefix = not phrase and raw.endswith("*")
        if phrase or not prefix:
            terms.append((words, False))
        else:  # `a-b*`: every word, the last one as a prefix
            terms.extend(([w], False) for w in words[:-1])
            terms.append(([words[-1]], True))
    return terms[:16]


def fts_expression(terms: list[tuple[list[str], bool]]) -> str:
    """The FTS5 MATCH expression of parsed terms (every term quoted: no FTS5 syntax leaks)."""
    parts = []
    for words, prefix in terms:
        parts.append('"' + " ".join(words) + '"' + ("*" if prefix else ""))
    return " AND ".join(parts)


def ts_query(terms: list[tuple[list[str], bool]]) -> str:
    """The PostgreSQL `to_tsquery('simple', …)` text of parsed terms (a phrase as `<->`)."""
    parts = []
    for words, prefix in terms:
        joined = " <-> ".join(words)
        parts.append(f"({joined}:*)" if prefix else f"({joined})")
    return " & ".join(parts)


def matching(store: Store, query: str) -> ColumnElement[bool] | None:
    """A condition on `runs.id` for runs whose document matches `query` (None: no terms)."""
    terms = parse_terms(query)
    if not terms:
        return None
    runs: Any = RunRow
    if store.engine.dialect.name == "postgresql":
        found = text(
            "SELECT run_id FROM run_search WHERE document @@ to_tsquery('simple', :tsquery)"
        ).bindparams(tsquery=ts_query(terms))
    else:
        found = text("SELECT run_id FROM run_search WHERE run_search MATCH :match").bindparams(
            match=fts_expression(terms)
        )
    condition: ColumnElement[bool] = runs.id.in_(found.columns(column("run_id", String)))
    return condition


def newest_matches(
    store: Store, query: str, before: int | None, count: int
) -> list[tuple[int, str]]:
    """SQLite: up to `count` (row, run id) of the newest matching documents below row `before`,
    newest first; FTS5 reads only those. [] when the query has no terms."""
    terms = parse_terms(query)
    if not terms:
        return []
    sql = "SELECT rowid, run_id FROM run_search WHERE run_search MATCH :match"
    if before is not None:
        sql += " AND rowid < :before"
    sql += " ORDER BY rowid DESC LIMIT :count"
    values = {"match": fts_expression(terms), "before": before, "count": count}
    with store.engine.connect() as connection:
        return [(int(row), str(run)) for row, run in connection.execute(text(sql), values)]
