"""Schema migrations with Alembic, run programmatically at start-up (`tracecard serve`)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from sqlalchemy import text

if TYPE_CHECKING:
    from tracecard.traces.store import Store

MIGRATIONS = Path(__file__).parent / "migrations"
# One PostgreSQL advisory lock key for tracecard's migrations (the bytes of "tracecard").
MIGRATION_LOCK_KEY = 0x7472616365636172


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def migration_lock_path(database: Path | str) -> Path:
    """The file a SQLite database's migrations are serialised on (beside the database)."""
    return Path(f"{database}.migrate.lock")


@contextlib.contextmanager
def _sqlite_file_lock(store: Store) -> Iterator[None]:
    """An exclusive `flock` beside a SQLite file for the migration (SQLite has no advisory
    lock, and pysqlite runs DDL outside a transaction); nothing for other databases."""
    url = store.engine.url
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        yield
        return
    with open(migration_lock_path(database), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def upgrade(store: Store, revision: str = "head") -> None:
    """Bring the database to `revision`; safe to call on every start, by several processes at
    once: the migration runs under a lock (PostgreSQL: a transaction-scoped advisory lock;
    SQLite: an exclusive file lock beside the database), so a second `tracecard serve` waits
    for the first and then finds the schema at head."""
    # Alembic narrates every step at INFO; a server start should stay quiet unless asked.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    config = alembic_config()
    with _sqlite_file_lock(store), store.engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def revision(store: Store, message: str) -> None:
    """Autogenerate a new revision from the models (a developer's tool)."""
    config = alembic_config()
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)
