"""Database engines: SQLite tuned once (WAL, busy timeout, one writer), or PostgreSQL by URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import StaticPool

from tracecard.traces.urls import DEFAULT_DB_DIR as DEFAULT_DB_DIR
from tracecard.traces.urls import default_db_url as default_db_url
from tracecard.traces.urls import is_sqlite as is_sqlite
from tracecard.traces.urls import normalise_url as normalise_url


def _tune_sqlite(dbapi_connection: Any, _record: Any, busy_timeout_s: float) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    # WAL + NORMAL is durable across application crashes, which is what a recorder needs.
    cursor.execute("PRAGMA synchronous=NORMAL")
    # 64 MiB page cache: random span-id index inserts stop re-reading pages past ~100k spans
    cursor.execute("PRAGMA cache_size=-65536")
    # checkpoint every ~40 MB of WAL, not ~4 MB: a 1,000-span commit dirties ~500 to ~1,000
    # pages (the random span-id index), so the default checkpointed at almost every commit
    # and wrote each index page back once per commit instead of once per ten
    cursor.execute("PRAGMA wal_autocheckpoint=10000")
    cursor.close()


REPLACEMENT = "\ufffd"  # what a NUL or a lone surrogate becomes where the database needs it


def clean_text(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD (PostgreSQL refuses both)."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def clean_value(value: Any) -> Any:
    """`clean_text` applied to every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v) for v in value]
    return value


def json_text(value: Any, clean: bool = False) -> str:
    """JSON columns through orjson (several times faster on the span insert path). With `clean`
    (PostgreSQL), NUL and lone surrogates are replaced: `json` stores `\\u0000` but then
    cannot read it back as text."""
    try:
        encoded = orjson.dumps(value, default=str)
    except TypeError:  # a lone surrogate, or an integer beyond 64 bits
        cleaned = clean_value(value)
        try:
            return orjson.dumps(cleaned, default=str).decode()
        except TypeError:  # the integer: the standard library copes
            return json.dumps(cleaned, default=str)
    if clean and b"\\u0000" in encoded:
        encoded = orjson.dumps(clean_value(value), default=str)
    return encoded.decode()


def _pg_json_text(value: Any) -> str:
    return json_text(value, clean=True)


def _clean_parameters(parameters: Any) -> Any:
    if isinstance(parameters, str):
        return clean_text(parameters) if "\x00" in parameters else parameters
    if isinstance(parameters, dict):
        return {k: _clean_parameters(v) for k, v in parameters.items()}
    if isinstance(parameters, list | tuple):
        return type(parameters)(_clean_parameters(v) for v in parameters)
    return parameters


def _strip_nul(
    _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
) -> tuple[str, Any]:
    """Every text parameter sent to PostgreSQL, NUL replaced (`text` cannot hold one)."""
    return statement, _clean_parameters(parameters)


# A SQLite file's connections are kept for every thread that may use one at once (anyio's 40
# worker threads): with SQLAlchemy's default (5 kept, 10 more opened and closed again, the rest
# waiting for one), 32 sessions closed together queued for connections, and most of the ones
# they got were opened and tuned for them, then closed. The CPU a session's open and close
# takes read 8.8 against 9.8 ms in one paired run and the same in another: within the noise.
# A connection's page cache grows only with the pages it reads, up to `cache_size`.
SQLITE_POOL: dict[str, Any] = {"pool_size": 40, "max_overflow": 10}


def make_engine(url: str, busy_timeout_s: float = 10.0) -> Engine:
    """Create an engine for `url`; for SQLite the parent folder is created. A write that meets
    a lock held longer than `busy_timeout_s` fails with `database is locked` (and is retried
    by the span writes, see `tracecard.traces.writes`)."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        in_memory = path in ("", ":memory:")
        if not in_memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_s},
            json_serializer=json_text,
            # `sqlite://` is the store's in-memory double (unit tests): one connection shared
            # by every thread, so the exporter's thread and the server's see one database.
            **({"poolclass": StaticPool} if in_memory else SQLITE_POOL),
        )
        event.listen(
            engine, "connect", lambda conn, record: _tune_sqlite(conn, record, busy_timeout_s)
        )
        return engine
    engine = create_engine(
        url, pool_pre_ping=True, pool_size=5, max_overflow=10, json_serializer=_pg_json_text
    )
    event.listen(engine, "before_cursor_execute", _strip_nul, retval=True)
    return engine
