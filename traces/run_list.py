"""The runs list's one query: filters, verdicts, full-text search, sorting, a total, keyset pages.

Every page costs what the first costs: pages are keyed on (sort column, id), each sort column
has an index `(column, id)` (`tracecard.traces.models`), and filters on spans and scores are
EXISTS subqueries probed per run through `ix_spans_run_start` and `uq_scores_run_component`.
Text filters (task, config, tool, error type, experiment) match a prefix: `task=escal` finds
`escalate-refund`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import (
    String,
    and_,
    cast,
    column,
    exists,
    false,
    func,
    literal,
    or_,
    select,
    text,
)
from sqlalchemy.sql.elements import ColumnElement, TextClause

from tracecard.traces import semconv
from tracecard.traces.models import RunRow, ScoreRow, SpanRow
from tracecard.traces.search import (
    SLOTS,
    fts_expression,
    matching,
    newest_matches,
    parse_terms,
    time_rowid,
    ts_query,
)
from tracecard.traces.store import Store

__all__ = ["COUNT_CAP", "SORTS", "VERDICT_FILTERS", "RunList", "RunQuery", "find_runs"]

SORTS: Final = ("created", "duration", "calls", "errors", "tokens")
_SORT_COLUMNS: Final = {
    "created": "created_at",
    "duration": "duration_ms",
    "calls": "calls",
    "errors": "errors",
    "tokens": "tokens",
}
# `status=failed` etc.: a verdict (`tracecard.scorers.verdict`), not a stored status
VERDICT_FILTERS: Final = ("passed", "failed", "not_evaluated", "errored")
_LIVE: Final = ("pending", "running")
PAGE_MAX: Final = 500
# Matching runs are counted up to this many: past it the list says "more than 10,000", so a
# broad filter over a million runs does not scan them all to say how many there are.
COUNT_CAP: Final = 10_000
SEARCH_BATCH_MAX: Final = 20_000  # matching documents read at once (newest first)
SEARCH_COUNT_BUDGET: Final = 5_000  # newest documents a search among other filters counts in


@dataclass(frozen=True)
class RunQuery:
    """What the list is narrowed to and how it is ordered; unset fields do not filter."""

    status: str | None = None  # a run status, or a verdict (VERDICT_FILTERS)
    component: str | None = None  # runs where this component failed; "any": any component
    task: str | None = None
    config: str | None = None
    tool: str | None = None
    error: str | None = None
    flag: str | None = None
    experiment: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None  # full-text search (tracecard.traces.search)
    sort: str = "created"
    descending: bool = True

    def active(self) -> dict[str, str]:
        """The filters that are set (not the order), by name, as text."""
        found: dict[str, str] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in ("sort", "descending") or value in (None, ""):
                continue
            found[item.name] = value.isoformat() if isinstance(value, datetime) else str(value)
        return found


@dataclass(frozen=True)
class RunList:
    """One page of runs, the cursor of the next page (None on the last), and how many match
    (at most COUNT_CAP + 1: `more` says the count stopped there)."""

    runs: list[RunRow]
    next_cursor: str | None
    total: int
    exact: bool = True  # False: the count stopped early, `total` is a lower bound

    @property
    def more(self) -> bool:
        return self.total > COUNT_CAP or not self.exact


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _encode(sort: str, run: RunRow) -> str:
    value = getattr(run, _SORT_COLUMNS[sort])
    shown = _utc(value).isoformat() if isinstance(value, datetime) else str(int(value or 0))
    raw = f"{sort}|{shown}|{run.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(sort: str, cursor: str) -> tuple[Any, str] | None:
    """(sort value, run id) of a cursor of this sort order; None when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        name, value, run_id = raw.split("|", 2)
        if name != sort:
            return None
        if sort == "created":
            return _utc(datetime.fromisoformat(value)), run_id
        return int(value), run_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def _prefix(column: Any, value: str) -> ColumnElement[bool]:
    condition: ColumnElement[bool] = column.startswith(value, autoescape=True)
    return condition


def _verdict(runs: Any, verdict: str) -> ColumnElement[bool]:
    """`tracecard.scorers.verdict.run_verdict` as a condition: live runs are `running`, an
    errored run is `errored` whatever its scores, any other run is what its scores say
    (`runs.score_verdict`, written with them); served by `ix_runs_verdict_created`."""
    if verdict == "errored":
        condition: ColumnElement[bool] = runs.status == "errored"
        return condition
    return and_(runs.score_verdict == verdict, runs.status.not_in((*_LIVE, "errored")))


def _conditions(
    store: Store, query: RunQuery, with_text: bool = True
) -> list[ColumnElement[bool]]:
    runs: Any = RunRow
    spans: Any = SpanRow
    scores: Any = ScoreRow
    where: list[ColumnElement[bool]] = []
    if query.status in VERDICT_FILTERS:
        where.append(_verdict(runs, query.status))
    elif query.status:
        where.append(runs.status == query.status)
    if query.component:
        # a run where a component failed is one whose scores say "failed": the index narrows
        where.append(runs.score_verdict == "failed")
        if query.component != "any":
            failed = [scores.run_id == runs.id, scores.passed == false()]
            where.append(exists().where(*failed, scores.component == query.component))
    if query.task:
        where.append(_prefix(runs.task_id, query.task))
    if query.config:
        where.append(_prefix(runs.config_name, query.config))
    if query.experiment:
        where.append(_prefix(runs.experiment_id, query.experiment))
    if query.tool:
        # observed calls only (not a probe, not an agent's span claiming one), as scorers count
        where.append(
            exists().where(
                spans.run_id == runs.id,
                spans.role == semconv.ROLE_AGENT,
                _prefix(spans.tool_name, query.tool),
            )
        )
    if query.error:
        errors = _prefix(spans.error_type, query.error)
        where.append(exists().where(spans.run_id == runs.id, errors))
    if query.flag:
        # flags are a short JSON list of names; their JSON text holds the quoted name
        where.append(cast(runs.flags, String).like(f'%"{query.flag}"%'))
    if query.since:
        where.append(runs.created_at >= _utc(query.since))
    if query.until:
        where.append(runs.created_at < _utc(query.until))
    if query.text and with_text:
        found = matching(store, query.text)
        where.append(found if found is not None else false())
    return where


def _newest_first_search(store: Store, query: RunQuery) -> bool:
    """Whether the search reads the full-text index newest first and stops when the page is
    full (SQLite, newest first); otherwise the index is one IN condition among the others."""
    return bool(query.text) and store.engine.dialect.name == "sqlite" and (
        query.sort == "created" and query.descending
    )


def _searched_page(
    store: Store, query: RunQuery, page: list[ColumnElement[bool]], before: int | None, limit: int
) -> list[RunRow]:
    """The page's runs, from the newest matching documents in growing batches."""
    runs: Any = RunRow
    assert query.text is not None
    found: list[RunRow] = []
    batch = max(4 * (limit + 1), 200)
    with store.session() as session:
        while True:
            matches = newest_matches(store, query.text, before, batch)
            if not matches:
                break
            chosen = select(RunRow).where(*page, runs.id.in_([run for _row, run in matches]))
            found.extend(session.scalars(chosen.order_by(runs.created_at.desc(), runs.id.desc())))
            if len(found) > limit or len(matches) < batch:
                break
            before, batch = matches[-1][0], min(batch * 4, SEARCH_BATCH_MAX)
    return found[: limit + 1]


def _searched_count(
    store: Store, query: RunQuery, others: list[ColumnElement[bool]]
) -> tuple[int, bool]:
    """(matching runs up to COUNT_CAP + 1, exact?): the index alone when search is the only
    filter; else the newest SEARCH_COUNT_BUDGET matching documents against the other filters
    (not exact when there are more)."""
    assert query.text is not None
    match = fts_expression(parse_terms(query.text))
    matches = text(
        "SELECT count(*) FROM (SELECT 1 FROM run_search WHERE run_search MATCH :match LIMIT :cap)"
    )
    with store.session() as session:
        if not others:
            found = session.execute(matches, {"match": match, "cap": COUNT_CAP + 1})
            return int(found.scalar_one()), True
        newest = text(
            "SELECT run_id FROM run_search WHERE run_search MATCH :match "
            "ORDER BY rowid DESC LIMIT :budget"
        ).bindparams(match=match, budget=SEARCH_COUNT_BUDGET)
        seen = session.execute(matches, {"match": match, "cap": SEARCH_COUNT_BUDGET + 1})
        return _count_among(session, others, newest, int(seen.scalar_one()))


def _postgres_searched_count(
    session: Any, tsquery: str, others: list[ColumnElement[bool]]
) -> tuple[int, bool]:
    """PostgreSQL: (runs matching `others` among the first SEARCH_COUNT_BUDGET documents that
    match `tsquery`, up to COUNT_CAP + 1; exact when there were no more matches)."""
    matching = "FROM run_search WHERE document @@ to_tsquery('simple', :tsquery)"
    first = text(f"SELECT run_id {matching} LIMIT :budget").bindparams(
        tsquery=tsquery, budget=SEARCH_COUNT_BUDGET
    )
    seen = session.execute(
        text(f"SELECT count(*) FROM (SELECT 1 {matching} LIMIT :cap) AS found"),
        {"tsquery": tsquery, "cap": SEARCH_COUNT_BUDGET + 1},
    )
    return _count_among(session, others, first, int(seen.scalar_one()))


def _count_among(
    session: Any, others: list[ColumnElement[bool]], documents: TextClause, seen: int
) -> tuple[int, bool]:
    """(runs matching `others` among the runs of `documents` (a run_id query), up to COUNT_CAP
    + 1; exact?): not exact when `seen` (matches counted up to the budget + 1) passed it."""
    runs: Any = RunRow
    among = runs.id.in_(documents.columns(column("run_id", String)))
    capped = select(runs.id).where(*others, among).limit(COUNT_CAP + 1).subquery()
    total = int(session.execute(select(func.count()).select_from(capped)).scalar_one())
    return total, total > COUNT_CAP or seen <= SEARCH_COUNT_BUDGET


def find_runs(
    store: Store, query: RunQuery, *, cursor: str | None = None, limit: int = 50
) -> RunList:
    """The runs matching `query` in its order, `limit` per page after `cursor`, and the total."""
    runs: Any = RunRow
    sort = query.sort if query.sort in SORTS else "created"
    column = getattr(runs, _SORT_COLUMNS[sort])
    limit = max(1, min(limit, PAGE_MAX))
    fast_search = _newest_first_search(store, query)
    where = _conditions(store, query, with_text=not fast_search)
    page = list(where)
    position = _decode(sort, cursor) if cursor else None
    if position is not None:
        value, run_id = position
        if query.descending:
            page.append(or_(column < value, and_(column == value, runs.id < run_id)))
        else:
            page.append(or_(column > value, and_(column == value, runs.id > run_id)))
    order = (column.desc(), runs.id.desc()) if query.descending else (column.asc(), runs.id.asc())
    if fast_search:
        before = time_rowid(position[0]) + SLOTS if position is not None else None
        rows = _searched_page(store, query, page, before, limit)
        total, exact = _searched_count(store, query, where)
    else:
        listing = select(RunRow).where(*page).order_by(*order).limit(limit + 1)
        # a constant, not the id: the count reads only the index that serves the filter
        limited = select(literal(1)).select_from(RunRow).where(*where).limit(COUNT_CAP + 1)
        counting = select(func.count()).select_from(limited.subquery())
        postgres_search = bool(query.text) and store.engine.dialect.name == "postgresql"
        with store.session() as session:
            if postgres_search:
                # newest first, the planner walks the runs backwards probing each one's document:
                # serially it stops after the page (14 ms for a word in 1% of 1,000,000 runs);
                # its parallel plan read 12 times as many runs (683 ms)
                session.execute(text("SET LOCAL max_parallel_workers_per_gather = 0"))
            rows = list(session.scalars(listing))
            terms = parse_terms(query.text or "")
            if postgres_search and len(where) == 1 and terms:
                # search alone: counted in the search index, not joined to the runs (44 ms
                # against 461 ms for 10,000 matches)
                counted = text(
                    "SELECT count(*) FROM (SELECT 1 FROM run_search WHERE document @@ "
                    "to_tsquery('simple', :tsquery) LIMIT :cap) AS found"
                )
                values = {"tsquery": ts_query(terms), "cap": COUNT_CAP + 1}
                found = session.execute(counted, values)
                total, exact = int(found.scalar_one()), True
            elif postgres_search and terms:
                # search among other filters: joining every match to the runs cost 410 ms for a
                # word in 1% of 1,000,000 runs; as on SQLite, the other filters are counted
                # among SEARCH_COUNT_BUDGET matches, and the total says "at least" past them
                others = _conditions(store, query, with_text=False)
                total, exact = _postgres_searched_count(session, ts_query(terms), others)
            else:
                total, exact = int(session.execute(counting).scalar_one()), True
    more = len(rows) > limit
    rows = rows[:limit]
    cursor_next = _encode(sort, rows[-1]) if more and rows else None
    return RunList(rows, cursor_next, total, exact)
