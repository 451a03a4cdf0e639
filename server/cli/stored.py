"""Scorecards of stored experiments for the commands that only read them (`gate`, `report`).

From a SQLite file already at the migrations' head they are read with the standard library's
`sqlite3` (`tracecard.traces.sqlite_read`): no SQLAlchemy, no table models, about half of
`tracecard gate`'s start. Any other database (PostgreSQL, an older schema that must migrate
first, a file that is not a database) goes through the store as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tracecard.server.cli.common import describe_db
from tracecard.server.errors import ConfigError, RunError

if TYPE_CHECKING:
    from tracecard.scorers.scorecard import Scorecard
    from tracecard.server.settings import Settings
    from tracecard.traces.sqlite_read import SqliteRows

__all__ = ["Scorecards", "stored_scorecards"]


class Scorecards(Protocol):
    """Stored experiments, by id or configuration name, and their scorecards."""

    def resolve(self, ref: str, suite: str | None = None) -> str:
        """An experiment id, or a configuration's name (its latest experiment, on `suite`)."""
        ...

    def scorecard(self, experiment_id: str) -> Scorecard:
        """The experiment's scorecard; RunError 404 when there is no such experiment."""
        ...


class _FromStore:
    def __init__(self, store: Any) -> None:
        self.store = store

    def resolve(self, ref: str, suite: str | None = None) -> str:
        from tracecard.server.cli.gate import resolve_experiment

        return resolve_experiment(self.store, ref, suite)

    def scorecard(self, experiment_id: str) -> Scorecard:
        from tracecard.server.evaluation.scorecards import scorecard_for

        return scorecard_for(self.store, experiment_id)


class _FromSqlite:
    def __init__(self, rows: SqliteRows, where: str) -> None:
        self.rows = rows
        self.where = where

    def resolve(self, ref: str, suite: str | None = None) -> str:
        if self.rows.experiment(ref) is not None:
            return ref
        return self.rows.latest_of_config(ref, suite) or ref  # else: "no experiment with id …"

    def scorecard(self, experiment_id: str) -> Scorecard:
        from tracecard.scorers.stored import scorecard_of

        experiment = self.rows.experiment(experiment_id)
        if experiment is None:
            raise RunError(f"no experiment with id {experiment_id!r} in database {self.where}", 404)
        return scorecard_of(self.rows.stored_experiment(experiment))


def _at_head(rows: SqliteRows) -> bool:
    from tracecard.server.cli.schema import head_revision

    head = head_revision()
    return head is not None and rows.revisions() == [head]


@contextmanager
def stored_scorecards(settings: Settings) -> Iterator[Scorecards]:
    """The stored scorecards of the settings' database (which must exist)."""
    from tracecard.traces.urls import sqlite_path

    path = sqlite_path(settings.db)
    if path is not None and Path(path).is_file():
        from tracecard.traces.sqlite_read import SqliteRows

        try:
            rows: SqliteRows | None = SqliteRows(path)
        except sqlite3.Error:
            rows = None  # the store says what is wrong with it
        if rows is not None:
            try:
                if _at_head(rows):
                    try:
                        yield _FromSqlite(rows, describe_db(settings.db))
                    except sqlite3.Error as exc:
                        raise ConfigError(f"cannot read database {path}: {exc}") from exc
                    return
            finally:
                rows.close()
    from tracecard.server.cli.common import existing_store

    with existing_store(settings) as store:
        yield _FromStore(store)
