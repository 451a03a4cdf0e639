"""Database URLs, without importing SQLAlchemy: what a command needs to name its database before
it knows whether it needs an engine (`tracecard gate` on SQLite reads without one)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_DB_DIR", "default_db_url", "is_sqlite", "normalise_url", "sqlite_path"]

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


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL; None for another database, in-memory SQLite or URL options."""
    url = normalise_url(url)
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url[len("sqlite:///") :]
    return path if path and path != ":memory:" else None
