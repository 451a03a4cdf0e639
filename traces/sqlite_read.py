"""An experiment's stored rows read from a SQLite file with the standard library's `sqlite3`:
what `tracecard gate` needs, without importing SQLAlchemy and the table models (about half of
that command's start). Read-only; the same rows `tracecard.traces.experiments` reads, as plain
objects with the table models' attribute names and values (JSON columns decoded, booleans as
`bool`, times as the aware UTC `datetime` SQLModel's `UTCDateTime` reads).

Used only for a database at the migrations' head (`revisions()`); anything else goes through
the store, which migrates it first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

import orjson

from tracecard.traces.experiment_rows import INFRA_REASONS, StoredExperiment, superseded

if TYPE_CHECKING:
    from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SuiteRow, VerdictRow

__all__ = ["SqliteRows"]

_CHUNK = 500  # ids per `IN (...)`: SQLite's bound-parameter limit is far above


def _json(value: Any) -> Any:
    return orjson.loads(value) if value is not None else None


def _datetime(value: Any) -> Any:
    """As SQLModel's `UTCDateTime` reads it: stored without an offset, meaning UTC."""
    if not isinstance(value, str):
        return value
    moment = datetime.fromisoformat(value)
    return moment.replace(tzinfo=UTC) if moment.utcoffset() is None else moment.astimezone(UTC)


def _bool(value: Any) -> Any:
    return bool(value) if value is not None else None


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "JSON": _json,
    "DATETIME": _datetime,
    "BOOLEAN": _bool,
}


class SqliteRows:
    """Reads experiments, runs, scores and verdicts from one SQLite file (read-only)."""

    def __init__(self, path: str) -> None:
        uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
        self._db = sqlite3.connect(uri, uri=True)
        self._db.execute("PRAGMA busy_timeout=10000")
        self._converters: dict[str, list[tuple[int, Callable[[Any], Any]]]] = {}

    def close(self) -> None:
        self._db.close()

    def revisions(self) -> list[str]:
        """The migration revisions the database records ([] without the table)."""
        try:
            found = self._db.execute("SELECT version_num FROM alembic_version")
            return [str(row[0]) for row in found]
        except sqlite3.DatabaseError:
            return []

    def _rows(self, table: str, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """`SELECT * FROM table …` as objects with the columns' names, values converted."""
        cursor = self._db.execute(f"SELECT * FROM {table} {sql}", parameters)
        names = [column[0] for column in cursor.description]
        convert = self._converters.get(table)
        if convert is None:
            columns = self._db.execute(f"PRAGMA table_info({table})")
            declared = {row[1]: str(row[2]).upper() for row in columns}
            convert = self._converters[table] = [
                (i, _CONVERT[declared[name]])
                for i, name in enumerate(names)
                if declared.get(name) in _CONVERT
            ]
        found = []
        for row in cursor:
            values = list(row)
            for i, change in convert:
                values[i] = change(values[i])
            found.append(SimpleNamespace(**dict(zip(names, values, strict=True))))
        return found

    def _by_ids(self, table: str, ids: list[str], order: str) -> list[Any]:
        found: list[Any] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            found += self._rows(table, f"WHERE run_id IN ({marks}) ORDER BY {order}", chunk)
        return found

    def experiment(self, experiment_id: str) -> ExperimentRow | None:
        """One experiment by id."""
        found = self._rows("experiments", "WHERE id = ?", (experiment_id,))
        return cast("ExperimentRow", found[0]) if found else None

    def latest_of_config(self, config_name: str, suite: str | None = None) -> str | None:
        """The id of a configuration's latest experiment (on `suite`, a name or version)."""
        sql = "SELECT id FROM experiments WHERE config_name = ?"
        parameters: list[Any] = [config_name]
        if suite is not None:
            sql += " AND (suite_name = ? OR suite_version = ?)"
            parameters += [suite, suite]
        row = self._db.execute(f"{sql} ORDER BY created_at DESC, id LIMIT 1", parameters).fetchone()
        return str(row[0]) if row else None

    def stored_experiment(self, experiment: ExperimentRow) -> StoredExperiment:
        """Everything the experiment's scorecard needs (as `experiments.stored_experiment`)."""
        order = "ORDER BY task_id, trial, id"
        found = self._rows("runs", f"WHERE experiment_id = ? {order}", (experiment.id,))
        every = cast("list[RunRow]", [r for r in found if r.task_id])
        numbers = {
            str(run_id): int(number)
            for run_id, number in self._db.execute(
                "SELECT run_id, attempt FROM job_attempts WHERE experiment_id = ?",
                (experiment.id,),
            )
        }
        # earlier attempts of a cell, and attempts lost to the infrastructure
        replaced = superseded(every, {run for run, number in numbers.items() if number > 1})
        runs = [r for r in every if r.id not in replaced]
        ids = [r.id for r in runs]
        scores: dict[str, list[ScoreRow]] = {run_id: [] for run_id in ids}
        # (run, component): the unique index's order, the one the store's query comes back in
        for score in self._by_ids("scores", ids, "run_id, component"):
            scores[score.run_id].append(score)
        verdicts: dict[str, list[VerdictRow]] = {}
        for verdict in self._by_ids("verdicts", ids, "created_at, id"):
            verdicts.setdefault(verdict.run_id, []).append(verdict)
        suites = self._rows("suites", "WHERE version = ?", (experiment.suite_version,))
        return StoredExperiment(
            experiment=experiment,
            suite=cast("SuiteRow", suites[0]) if suites else None,
            runs=runs,
            scores=scores,
            verdicts=verdicts,
            attempts=numbers,
            infra=[r for r in every if r.end_reason in INFRA_REASONS],
        )
