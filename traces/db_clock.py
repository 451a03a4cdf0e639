"""The database's clock, for instants several processes compare (a backoff's end, a worker's
heartbeat): read from the one database they share, never from a machine whose clock may be
off. PostgreSQL's `clock_timestamp()`, SQLite's `strftime(…, 'now')` (UTC, to the ms)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

__all__ = ["as_instant", "database_now", "now_clause"]


def now_clause(session: Session) -> Any:
    """The database's current time (UTC) as a column expression."""
    if session.get_bind().dialect.name == "sqlite":
        return func.strftime("%Y-%m-%d %H:%M:%f", "now")
    return func.clock_timestamp()  # the statement's time, not the transaction's


def as_instant(value: Any) -> datetime:
    """A value of `now_clause` (or a stored time) as an aware UTC datetime."""
    if isinstance(value, str):  # SQLite's strftime
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    moment: datetime = value
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def database_now(session: Session) -> datetime:
    """The database's clock, read in `session`."""
    return as_instant(session.execute(select(now_clause(session))).scalar_one())
