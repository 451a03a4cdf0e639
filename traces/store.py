"""The span and run store: idempotent span inserts, run rows, and the queries the API reads.

Everything here is synchronous SQLAlchemy: the span exporter calls it from the batch processor's
thread, and the async server calls it through a worker thread, never on the proxy's hot path.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic_core import PydanticUndefined
from sqlalchemy import (
    Connection,
    Engine,
    RowMapping,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import configure_mappers
from sqlmodel import Session, SQLModel

from tracecard.traces.deadletter import DeadLetters
from tracecard.traces.engine import is_sqlite, make_engine, normalise_url
from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SpanRow
from tracecard.traces.span_rows import insert_rows, span_rows
from tracecard.traces.span_rows import span_values as span_values
from tracecard.traces.writes import SpanDict as SpanDict
from tracecard.traces.writes import WriteHealth, write_spans

BUSY_WAIT_S = 30.0  # how long a caller that did not say waits for a locked database


def span_row_to_dict(row: SpanRow) -> SpanDict:
    """A stored span in the JSON API shape (attributes as a flat object, values as recorded)."""
    return {
        "trace_id": row.trace_id,
        "span_id": row.span_id,
        "parent_span_id": row.parent_span_id,
        "name": row.name,
        "kind": row.kind,
        "start_time_unix_nano": row.start_ns,
        "end_time_unix_nano": row.end_ns,
        "status": {"code": row.status_code, "message": row.status_message},
        "attributes": row.attributes,
        "events": row.events,
        "resource": row.resource,
        "scope": row.scope,
        "run_id": row.run_id,
        "links": row.links or [],
    }


def _mapping_to_dict(row: RowMapping) -> SpanDict:
    return {
        "trace_id": row["trace_id"],
        "span_id": row["span_id"],
        "parent_span_id": row["parent_span_id"],
        "name": row["name"],
        "kind": row["kind"],
        "start_time_unix_nano": row["start_ns"],
        "end_time_unix_nano": row["end_ns"],
        "status": {"code": row["status_code"], "message": row["status_message"]},
        "attributes": row["attributes"],
        "events": row["events"],
        "resource": row["resource"],
        "scope": row["scope"],
        "run_id": row["run_id"],
        "links": row["links"] or [],
    }


# a run's fields by id: the SET clause is the parameters' other keys (see `write_run`)
_RUN_TABLE: Any = RunRow.__table__  # type: ignore[attr-defined]
_RUN_BY_ID = update(_RUN_TABLE).where(_RUN_TABLE.c.id == bindparam("_run_id"))
_RUN_READ = select(_RUN_TABLE).where(_RUN_TABLE.c.id == bindparam("_run_id"))
_RUN_INSERT = insert(_RUN_TABLE)


def run_defaults() -> dict[str, Any]:
    """Every field of a new `RunRow` that has a default, as `RunRow(...)` fills it in (the
    default factories called anew)."""
    values: dict[str, Any] = {}
    for name, field in RunRow.model_fields.items():
        if field.default_factory is not None:
            values[name] = field.default_factory()  # type: ignore[call-arg]
        elif field.default is not PydanticUndefined:
            values[name] = field.default
    return values


def detached_run(values: dict[str, Any]) -> RunRow:
    """A `RunRow` of stored values, built without a session or validation (as the ORM loads
    one): for reading. It belongs to no session, and its fields are not to be set.

    Its attributes are the ORM's, which work only once the mappers are configured: a process
    whose first work is a run's end through Core (an ad-hoc run's insert, read and UPDATE) has
    not configured them yet, and `configure_mappers` does so once (then it returns at once)."""
    configure_mappers()
    return RunRow.model_construct(**values)


class Store:
    """Owns the engine. On SQLite all writes go through one lock: one writer at a time.
    `Store("sqlite://")` is the in-memory double for unit tests (one database for all threads)."""

    def __init__(
        self, url: str, engine: Engine | None = None, busy_timeout_s: float = 10.0
    ) -> None:
        self.url = normalise_url(url)
        self.engine = engine or make_engine(self.url, busy_timeout_s)
        self._sqlite = is_sqlite(self.url)
        self._write_lock = threading.Lock()
        self.health = WriteHealth()
        self.dead_letters: DeadLetters | None = None  # where unstorable rows go (the runtime's)

    # --- lifecycle ------------------------------------------------------------------------------
    def create_schema(self) -> None:
        """Create every table and index that does not exist yet (see `tracecard.traces.migrate`)."""
        from tracecard.traces.migrate import upgrade

        upgrade(self)

    def dispose(self) -> None:
        self.engine.dispose()

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A session whose changes are committed on exit, holding the writer lock on SQLite."""
        if self._sqlite:
            with self._write_lock, self.session() as session:
                yield session
                session.commit()
        else:
            with self.session() as session:
                yield session
                session.commit()

    @contextmanager
    def write_connection(self) -> Iterator[Connection]:
        """A Core connection in a transaction committed on exit (the writer lock on SQLite):
        for writes that need no ORM session, which costs more than they do."""
        with self._write_lock if self._sqlite else contextlib.nullcontext():
            with self.engine.begin() as connection:
                yield connection

    # --- spans ----------------------------------------------------------------------------------
    def insert_spans(
        self, spans: Iterable[SpanDict], keep_trying: Callable[[], bool] | None = None
    ) -> int:
        """Insert spans in one transaction; a span id already stored is left as it is.

        A locked or unreachable database is retried while `keep_trying()` (default: for
        `BUSY_WAIT_S`), then `DatabaseBusy` is raised; a batch that fails on its content is
        written row by row, a bad row in its readable form (see `tracecard.traces.writes`).
        Returns how many spans were written (or were already there)."""
        batch = list(spans)
        if not batch:
            return 0
        if keep_trying is None:
            deadline = time.monotonic() + BUSY_WAIT_S
            keep_trying = lambda: time.monotonic() < deadline  # noqa: E731
        return write_spans(self._insert_batch, batch, self.health, keep_trying, self.dead_letters)

    def _insert_batch(self, spans: list[SpanDict]) -> None:
        """Driver-level inserts with JSON encoded by orjson: the span exporter and OTLP ingest
        call this with thousands of spans, where SQLAlchemy's per-row processing costs more
        than SQLite itself."""
        rows = span_rows(spans, clean=not self._sqlite)
        with self.write_connection() as connection:
            insert_rows(connection, rows, sqlite=self._sqlite)

    def spans_for_run(self, run_id: str) -> list[SpanDict]:
        """All spans of a run (by run id, or by the run's trace id), in start-time order."""
        with self.session() as session:
            run = session.get(RunRow, run_id)
            query = select(SpanRow).where(SpanRow.run_id == run_id)  # type: ignore[arg-type]
            rows = list(session.scalars(query))
            if run is not None:
                seen = {r.span_id for r in rows}
                by_trace = select(SpanRow).where(
                    SpanRow.trace_id == run.trace_id  # type: ignore[arg-type]
                )
                rows.extend(r for r in session.scalars(by_trace) if r.span_id not in seen)
        rows.sort(key=lambda r: (r.start_ns, r.span_id))
        return [span_row_to_dict(r) for r in rows]

    def first_span_start(self, run_id: str) -> int | None:
        """When the run's earliest stored span started (ns), or None."""
        table = SpanRow.__table__  # type: ignore[attr-defined]
        with self.engine.connect() as connection:
            query = select(func.min(table.c.start_ns)).where(table.c.run_id == run_id)
            value = connection.execute(query).scalar()
        return int(value) if value is not None else None

    def span(self, span_id: str) -> SpanDict | None:
        with self.session() as session:
            row = session.get(SpanRow, span_id)
            return span_row_to_dict(row) if row is not None else None

    # --- runs -----------------------------------------------------------------------------------
    def add_run(self, run: RunRow) -> RunRow:
        """Insert a run; a trial of an experiment beyond its `trials` (a round of `run --trials
        auto`, a trial added by hand) raises the experiment's `trials` to the trials that exist,
        in the same transaction, so every reader of the row sees the trials actually run."""
        with self.writing() as session:
            session.add(run)
            if run.experiment_id is not None:
                session.execute(
                    update(ExperimentRow)
                    .where(ExperimentRow.id == run.experiment_id)  # type: ignore[arg-type]
                    .where(ExperimentRow.trials < run.trial + 1)  # type: ignore[arg-type]
                    .values(trials=run.trial + 1)
                )
        return run

    def insert_run(self, fields: dict[str, Any]) -> None:
        """Insert a run of no experiment from its fields and the model's defaults: the row
        `add_run(RunRow(**fields))` writes, with one Core insert instead of a model and a unit
        of work (an ad-hoc run is created with every MCP session)."""
        if fields.get("experiment_id") is not None:
            raise ValueError("insert_run is for runs of no experiment: use add_run")
        with self.write_connection() as connection:
            connection.execute(_RUN_INSERT, {**run_defaults(), **fields})

    def add_all(self, rows: Sequence[SQLModel]) -> None:
        """Insert rows of any table in one transaction: all or nothing."""
        with self.writing() as session:
            session.add_all(rows)

    def get_run(self, run_id: str) -> RunRow | None:
        with self.session() as session:
            return session.get(RunRow, run_id)

    def read_run(self, run_id: str, connection: Connection | None = None) -> dict[str, Any] | None:
        """A run's stored values by column, read without an ORM session (`detached_run` makes
        a row of them), on `connection` if given; None if there is no such run."""
        if connection is None:
            with self.engine.connect() as connection:
                return self.read_run(run_id, connection)
        found = connection.execute(_RUN_READ, {"_run_id": run_id}).mappings().first()
        return dict(found) if found is not None else None

    def write_run(
        self, run_id: str, fields: dict[str, Any], connection: Connection | None = None
    ) -> bool:
        """Write `fields` on a run in one UPDATE, which SQLAlchemy compiles once per set of fields
        (through the ORM, a read and its unit of work, it cost 0.50 ms against 0.08), in
        `connection`'s transaction if given (see `write_connection`); whether the run was
        there."""
        if connection is None:
            with self.write_connection() as connection:
                return self.write_run(run_id, fields, connection)
        return bool(connection.execute(_RUN_BY_ID, {"_run_id": run_id, **fields}).rowcount)

    def update_run(self, run_id: str, **fields: Any) -> RunRow | None:
        """Write `fields` on a run and return it as stored then; None if there is no such run."""
        if fields and not self.write_run(run_id, fields):
            return None
        return self.get_run(run_id)

    def run_for_trace(self, trace_id: str) -> RunRow | None:
        with self.session() as session:
            query = select(RunRow).where(RunRow.trace_id == trace_id)  # type: ignore[arg-type]
            return session.scalars(query).first()

    def adhoc_run(self, key: str) -> RunRow | None:
        with self.session() as session:
            query = select(RunRow).where(RunRow.adhoc_key == key)  # type: ignore[arg-type]
            return session.scalars(query).first()

    # --- scores ---------------------------------------------------------------------------------
    def spans_for_runs(self, runs: Sequence[RunRow]) -> dict[str, list[SpanDict]]:
        """Spans of many runs (by run id, then by trace id), each in start order; Core rows,
        not ORM objects, because rescoring reads hundreds of thousands of them."""
        by_run: dict[str, list[SpanDict]] = {run.id: [] for run in runs}
        run_of_trace = {run.trace_id: run.id for run in runs}
        table = SpanRow.__table__  # type: ignore[attr-defined]
        seen: set[str] = set()
        with self.engine.connect() as connection:
            for start in range(0, len(runs), 500):
                chunk = runs[start : start + 500]
                by_id = select(table).where(table.c.run_id.in_([r.id for r in chunk]))
                for row in connection.execute(by_id).mappings():
                    seen.add(row["span_id"])
                    by_run[row["run_id"]].append(_mapping_to_dict(row))
                by_trace = select(table).where(table.c.trace_id.in_([r.trace_id for r in chunk]))
                for row in connection.execute(by_trace).mappings():
                    if row["span_id"] not in seen:
                        seen.add(row["span_id"])
                        by_run[run_of_trace[row["trace_id"]]].append(_mapping_to_dict(row))
        for spans in by_run.values():
            spans.sort(key=lambda s: (s["start_time_unix_nano"], s["span_id"]))
        return by_run

    def replace_scores(
        self,
        scores: dict[str, list[dict[str, Any]]],
        flags: dict[str, list[str]],
        root_events: dict[str, list[dict[str, Any]]],
        verdicts: dict[str, str],
    ) -> None:
        """Replace the scores and flags of runs (and their roots' evaluation events) at once;
        `scores` maps a run id to ScoreRow column values, `verdicts` to what they say
        (`runs.score_verdict`, from `tracecard.scorers.verdict.scores_verdict`)."""
        if not scores:
            return
        missing = set(scores) - set(verdicts)
        if missing:  # a run whose scores change keeps no stale verdict
            raise ValueError(f"scores without a verdict for runs {sorted(missing)[:5]}")
        scores_table = ScoreRow.__table__  # type: ignore[attr-defined]
        runs_table = RunRow.__table__  # type: ignore[attr-defined]
        spans_table = SpanRow.__table__  # type: ignore[attr-defined]
        rows = [row for run_rows in scores.values() for row in run_rows]
        with self.writing() as session:
            session.execute(delete(scores_table).where(scores_table.c.run_id.in_(list(scores))))
            if rows:
                session.execute(scores_table.insert(), rows)
            session.execute(
                update(runs_table)
                .where(runs_table.c.id == bindparam("run"))
                .values(score_verdict=bindparam("verdict")),
                [{"run": k, "verdict": verdicts[k]} for k in scores],
            )
            if flags:
                session.execute(
                    update(runs_table)
                    .where(runs_table.c.id == bindparam("run"))
                    .values(flags=bindparam("new_flags")),
                    [{"run": k, "new_flags": v} for k, v in flags.items()],
                )
            if root_events:
                session.execute(
                    update(spans_table)
                    .where(spans_table.c.span_id == bindparam("span"))
                    .values(events=bindparam("new_events")),
                    [{"span": k, "new_events": v} for k, v in root_events.items()],
                )

    def scores_for_runs(self, run_ids: Sequence[str]) -> dict[str, list[ScoreRow]]:
        found: dict[str, list[ScoreRow]] = {run_id: [] for run_id in run_ids}
        with self.session() as session:
            for start in range(0, len(run_ids), 500):
                chunk = list(run_ids[start : start + 500])
                query = select(ScoreRow).where(ScoreRow.run_id.in_(chunk))  # type: ignore[attr-defined]
                for row in session.scalars(query):
                    found[row.run_id].append(row)
        return found
