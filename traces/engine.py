"""Database engines: SQLite tuned once (WAL, busy timeout, one writer), or PostgreSQL by URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event

DEFAULT_DB_DIR = Path(".tracecard")


def default_db_url(directory: Path = DEFAULT_DB_DIR) -> str:
    """The embedded SQLite database under `./.tracecard/`."""
    return f"sqlite:///{(directory / 'tracecard.db').as_posix()}"


def normalise_url(url: str) -> str:
    """Accept a bare file path or `postgresql://` and return a SQLAlchemy URL with a driver."""
    if "://" not in url:
        return f"sqlite:///{Path(url).as_posix()}"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def is_sqlite(url: str) -> bool:
    return normalise_url(url).startswith("sqlite")


def _tune_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    # WAL + NORMAL is durable across application crashes, which is what a recorder needs.
    cursor.execute("PRAGMA synchronous=NORMAL")
    # 64 MiB page cache: random span-id index inserts stop re-reading pages past ~100k spans
    cursor.execute("PRAGMA cache_size=-65536")
    cursor.close()


def json_text(value: Any) -> str:
    """JSON columns through orjson (several times faster on the span insert path)."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # e.g. an integer beyond 64 bits: the standard library copes
        return json.dumps(value, default=str)


def make_engine(url: str) -> Engine:
    """Create an engine for `url`; for SQLite the parent folder is created."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 10},
            json_serializer=json_text,
        )
        event.listen(engine, "connect", _tune_sqlite)
        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=5, max_overflow=10, json_serializer=json_text
    )
