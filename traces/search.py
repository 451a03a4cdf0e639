"""Full-text search over runs: one document per run (its tool names, arguments, results and
final answer), written when the run ends; SQLite FTS5 or PostgreSQL `tsvector` + GIN.

Search syntax (docs/viewer.md): words must all occur (`refund escalate`); `"two words"` must
occur together; `escal*` matches a word's beginning. Anything but letters and digits separates
words, as the index splits them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import String, column, select, text
from sqlalchemy.sql.elements import ColumnElement

from tracecard.traces import semconv
from tracecard.traces.models import RunRow, SpanRow
from tracecard.traces.store import Store

__all__ = ["DOCUMENT_MAX_CHARS", "index_runs", "matching", "parse_terms", "search_document"]

DOCUMENT_MAX_CHARS = 200_000  # of one run's document; the rest is not searchable
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w+", re.UNICODE)
_I64 = 1 << 63


def _rowid(run_id: str) -> int:
    """The FTS5 row of a run: a stable signed 64-bit number from its id."""
    digest = hashlib.blake2b(run_id.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "big")
    return value - (1 << 64) if value >= _I64 else value


def search_document(store: Store, run: RunRow) -> str:
    """What a run is found by: each agent tool call's name, arguments and result, and the
    final answer."""
    spans: Any = SpanRow
    query = (
        select(
            spans.tool_name,
            spans.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS].as_string(),
            spans.attributes[semconv.GEN_AI_TOOL_CALL_RESULT].as_string(),
        )
        .where(spans.run_id == run.id, spans.tool_name.is_not(None))
        .order_by(spans.start_ns)
    )
    parts: list[str] = []
    size = 0
    with store.engine.connect() as connection:
        for name, arguments, result in connection.execute(query):
            for part in (name, arguments, result):
                if part:
                    parts.append(str(part))
                    size += len(parts[-1])
            if size > DOCUMENT_MAX_CHARS:
                break
    if run.final_answer:
        parts.append(run.final_answer)
    return "\n".join(parts)[:DOCUMENT_MAX_CHARS].replace("\x00", " ")


def index_runs(store: Store, run_ids: Sequence[str]) -> None:
    """(Re)write the search documents of these runs."""
    for run_id in run_ids:
        run = store.get_run(run_id)
        if run is None:
            continue
        write_documents(store, [(run.id, search_document(store, run))])


def write_documents(store: Store, documents: Sequence[tuple[str, str]]) -> None:
    """Store (run id, document text) pairs, replacing a run's earlier document."""
    if not documents:
        return
    with store.writing() as session:
        if store.engine.dialect.name == "postgresql":
            session.execute(
                text(
                    "INSERT INTO run_search (run_id, document) "
                    "VALUES (:run, to_tsvector('simple', :body)) "
                    "ON CONFLICT (run_id) DO UPDATE SET document = excluded.document"
                ),
                [{"run": r, "body": body} for r, body in documents],
            )
            return
        rows = [{"row": _rowid(r), "run": r, "body": body} for r, body in documents]
        session.execute(text("DELETE FROM run_search WHERE rowid = :row"), rows)
        session.execute(
            text("INSERT INTO run_search (rowid, run_id, body) VALUES (:row, :run, :body)"), rows
        )


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


def matching(store: Store, query: str) -> ColumnElement[bool] | None:
    """A condition on `runs.id` for runs whose document matches `query` (None: no terms)."""
    terms = parse_terms(query)
    if not terms:
        return None
    runs: Any = RunRow
    if store.engine.dialect.name == "postgresql":
        parts = []
        for words, prefix in terms:
            joined = " <-> ".join(words)
            parts.append(f"({joined}:*)" if prefix else f"({joined})")
        found = text(
            "SELECT run_id FROM run_search WHERE document @@ to_tsquery('simple', :tsquery)"
        ).bindparams(tsquery=" & ".join(parts))
    else:
        parts = []
        for words, prefix in terms:
            phrase = '"' + " ".join(words) + '"'
            parts.append(phrase + ("*" if prefix else ""))
        found = text("SELECT run_id FROM run_search WHERE run_search MATCH :match").bindparams(
            match=" AND ".join(parts)
        )
    condition: ColumnElement[bool] = runs.id.in_(found.columns(column("run_id", String)))
    return condition
