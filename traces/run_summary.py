"""What the runs list shows of a run, summarised from its spans: calls, errors, tokens, upstreams,
client, duration; written on the run's row when it ends, computed on the fly while it runs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

import orjson
from sqlalchemy import Connection, Dialect, Select, and_, bindparam, case, func, or_, select

from tracecard.traces import semconv
from tracecard.traces.driver_sql import DriverStatement
from tracecard.traces.models import RunRow, SpanRow
from tracecard.traces.search import search_document, write_documents
from tracecard.traces.store import Store, detached_run

__all__ = ["RunSummary", "end_run", "summarize_runs"]

CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"  # the 2026-07-28 per-request `_meta`
# the spans whose params name the client (an OR of equalities rather than an IN, whose SQL
# SQLAlchemy renders at each execution: see `_one_run`)
_CLIENT_NAMED_BY = ("initialize", "server/discover", "tools/list")


@dataclass
class RunSummary:
    """A run's figures as its spans say (the root span left out)."""

    calls: int = 0
    errors: int = 0
    tokens: int = 0
    upstreams: list[str] = field(default_factory=list)
    first_ns: int | None = None
    last_ns: int | None = None
    client: str | None = None

    @property
    def duration_ms(self) -> int:
        if self.first_ns is None or self.last_ns is None:
            return 0
        return max(0, (self.last_ns - self.first_ns) // 1_000_000)


def _client_of(params_text: Any) -> str | None:
    """`name/version` from recorded params: `clientInfo` (initialize) or the `_meta` envelope."""
    if not isinstance(params_text, str):
        return None
    try:
        params = orjson.loads(params_text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    info = params.get("clientInfo")
    if info is None and isinstance(meta, dict):
        info = meta.get(CLIENT_INFO_META)
    if not isinstance(info, dict) or not info.get("name"):
        return None
    version = info.get("version")
    return (f"{info['name']}/{version}" if version else str(info["name"]))[:200]


def _queries(in_runs: Any, not_roots: Any) -> tuple[Select[Any], Select[Any], Select[Any]]:
    """The three summary queries over the spans `in_runs` selects, roots left out."""
    spans: Any = SpanRow
    agent = spans.role == semconv.ROLE_AGENT
    tokens = func.coalesce(
        spans.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS].as_integer(), 0
    ) + func.coalesce(spans.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS].as_integer(), 0)
    figures = (
        select(
            spans.run_id,
            func.sum(case((and_(agent, spans.tool_name.is_not(None)), 1), else_=0)),
            func.sum(case((and_(agent, spans.error_type.is_not(None)), 1), else_=0)),
            func.sum(case((spans.name.like(f"{semconv.OP_CHAT} %"), tokens), else_=0)),
            func.min(spans.start_ns),
            func.max(func.coalesce(spans.end_ns, spans.start_ns)),
        )
        .where(in_runs, not_roots)
        .group_by(spans.run_id)
    )
    upstream = spans.attributes[semconv.UPSTREAM].as_string()
    upstreams = select(spans.run_id, upstream).where(in_runs, upstream.is_not(None)).distinct()
    first_params = (
        select(spans.run_id, spans.attributes[semconv.RPC_PARAMS].as_string())
        .where(in_runs, or_(*(spans.name == name for name in _CLIENT_NAMED_BY)))
        .order_by(spans.start_ns)
    )
    return figures, upstreams, first_params


@cache
def _statements() -> tuple[Select[Any], Select[Any], Select[Any]]:
    """The three summary queries for runs by id, built once: building their expressions was most
    of the cost of ending a run (an ad-hoc run ends with every session), far more than running
    them."""
    spans: Any = SpanRow
    ids: Any = bindparam("ids", expanding=True)
    return _queries(spans.run_id.in_(ids), spans.span_id.not_in(bindparam("roots", expanding=True)))


@lru_cache(maxsize=16)  # (per engine's dialect)
def _one_run(dialect: Dialect) -> tuple[DriverStatement, ...]:
    """The same three queries for one run, compiled once for `dialect` and run on the driver's
    cursor (`traces/driver_sql.py`): a run's end summarises one run, with every MCP session."""
    spans: Any = SpanRow
    one = _queries(spans.run_id == bindparam("id"), spans.span_id != bindparam("root"))
    return tuple(DriverStatement(query, dialect, {"id", "root"}) for query in one)


def summarize_runs(
    store: Store, runs: Sequence[RunRow], connection: Connection | None = None
) -> dict[str, RunSummary]:
    """Each run's summary, in three grouped queries whatever the number of runs (on
    `connection` if given)."""
    if not runs:
        return {}
    if connection is None:
        with store.engine.connect() as connection:
            return summarize_runs(store, runs, connection)
    ids = [r.id for r in runs]
    found = {run_id: RunSummary() for run_id in ids}
    rows: list[Any]
    if len(runs) == 1:  # (a run's end: the driver's cursor, without SQLAlchemy's execution)
        one = {"id": runs[0].id, "root": runs[0].root_span_id}
        rows = [query.rows(connection, **one) for query in _one_run(connection.dialect)]
    else:
        figures, upstreams, first_params = _statements()
        values = {"ids": ids, "roots": [r.root_span_id for r in runs]}
        rows = [
            connection.execute(figures, values).all(),
            connection.execute(upstreams, {"ids": ids}).all(),
            connection.execute(first_params, {"ids": ids}).all(),
        ]
    for run_id, calls, errors, used, first, last in rows[0]:
        summary = found[run_id]
        summary.calls, summary.errors = int(calls or 0), int(errors or 0)
        summary.tokens = int(used or 0)
        summary.first_ns = int(first) if first is not None else None
        summary.last_ns = int(last) if last is not None else None
    for run_id, name in rows[1]:
        found[run_id].upstreams.append(str(name))
    pending = set(ids)
    for run_id, params in rows[2]:
        if run_id in pending and (client := _client_of(params)) is not None:
            found[run_id].client = client
            pending.discard(run_id)
    for summary in found.values():
        summary.upstreams.sort()
    return found


def end_run(
    store: Store,
    run_id: str,
    client: str | None = None,
    *,
    finish: bool = False,
    index: bool = False,
    **fields: Any,
) -> tuple[RunRow, RunSummary] | None:
    """Write the run's summary (and `fields`: status, end reason, ...) on its row; None if no
    such run. `client` is what the proxy saw, kept over what the spans say. With `finish`, the
    same write sets `finished_at` to its last span's end (else now), so no reader sees a
    finished run without its end; with `index`, its search document is written in the same
    transaction too (`tracecard.traces.search`).

    One connection reads (the row, the summary, the document) and one transaction writes. The
    row returned is the run as written, built from the values read and written
    (`detached_run`: for reading, in no session). An ad-hoc run ends with every MCP session:
    through the ORM and a connection a step, ending cost more than the queries themselves."""
    with store.engine.connect() as reading:
        stored = store.read_run(run_id, reading)
        if stored is None:
            return None
        run = detached_run(stored)
        summary = summarize_runs(store, [run], reading)[run_id]
        document = search_document(store, run, reading) if index else None
    values: dict[str, Any] = {
        "calls": summary.calls,
        "errors": summary.errors,
        "tokens": summary.tokens,
        "upstreams": summary.upstreams,
        "duration_ms": summary.duration_ms,
        "client": client or summary.client or run.client,
    }
    if summary.first_ns is not None and run.started_at is None:
        values["started_at"] = datetime.fromtimestamp(summary.first_ns / 1e9, UTC)
    elif run.started_at is None:  # as the root span says: the first message, else creation
        values["started_at"] = run.created_at
    if finish:
        last = summary.last_ns or time.time_ns()
        values["finished_at"] = datetime.fromtimestamp(last / 1e9, UTC)
    values.update(fields)
    with store.write_connection() as writing:
        if not store.write_run(run_id, values, writing):  # deleted while it was summarised
            return None
        if document is not None:
            write_documents(store, [(run_id, run.created_at, document)], writing)
    return detached_run({**stored, **values}), summary
