"""The trials comparison's query: the first N agent calls of each run, and how many it made.

An agent call is a tool call tracecard observed (role `agent`; an instrumented agent's own
tool spans are not evidence and are not counted) or a model turn (`is_agent_call_sql`).

A run of 300 tool calls has 300 spans with arguments and results; the comparison page aligns
only the first `limit` calls of each trial, so only those are read. One statement ranks each
run's agent calls with `ROW_NUMBER()` and counts them with `COUNT(*)` over the run (window
functions: SQLite 3.25+ and PostgreSQL), reading only narrow columns for the ranking, then joins
back on the primary key for the payloads of the calls that are shown. Payload JSON is decoded
with orjson, not by the column type (which uses the standard library).

A run's spans are those that carry its id and, for spans that carry none (an agent's own OTLP
spans), those of its trace, as in `tracecard.traces.queries.trace_outline`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Subquery, Text, case, cast, func, literal, or_, select, union_all
from sqlalchemy.sql.elements import ColumnElement

from tracecard.traces import semconv
from tracecard.traces.models import RunRow, SpanRow
from tracecard.traces.store import SpanDict, Store

__all__ = ["TrialCalls", "first_agent_calls", "is_agent_call_sql"]


@dataclass
class TrialCalls:
    """Per run id: its first agent calls and its turn spans, in start order (`spans`), the
    number of agent calls it made in all (`totals`) and, for a run with more calls than were
    read, the span id of the first call left out (`next_call`: where its trace continues)."""

    spans: dict[str, list[SpanDict]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    next_call: dict[str, str] = field(default_factory=dict)


def is_agent_call_sql() -> ColumnElement[bool]:
    """An agent's tool call that tracecard observed, or a model turn, in SQL: the same test as
    `tracecard.viewer.compare_runs` applies to a span dict.

    A tool call is evidence only when tracecard observed it (proxy, stdio bridge, a signed
    `tracecard wrap` span): those, and only those, carry `tracecard.role = agent` (the `role`
    column). An instrumented agent's own `execute_tool` span names the same tool but has no
    role (ingest stores it with `tracecard.evidence = agent_reported`), as
    `tracecard.scorers.calls.agent_calls` selects them. Model turns are every `chat` span but a
    verifier's, as `tracecard.scorers.model.model_turns` reads them; a plain HTTP tool call
    (role `agent`, an HTTP method, no MCP method, not a model request) counts too. The tool name
    and role are columns; attributes are read only for spans that name no tool."""
    spans: Any = SpanRow
    attributes = spans.attributes
    observed = spans.role == semconv.ROLE_AGENT
    # a plain HTTP tool (named by its method and path): no MCP method, not the /llm/ proxy
    http_tool = (
        attributes[semconv.MCP_METHOD_NAME].as_string().is_(None)
        & attributes[semconv.HTTP_REQUEST_METHOD].as_string().is_not(None)
        & attributes[semconv.GEN_AI_PROVIDER_NAME].as_string().is_(None)
    )
    return or_(
        observed & spans.tool_name.is_not(None),
        spans.tool_name.is_(None)
        & or_(
            or_(spans.role.is_(None), spans.role != semconv.ROLE_VERIFIER)
            & (attributes[semconv.GEN_AI_OPERATION_NAME].as_string() == semconv.OP_CHAT),
            observed & http_tool,
        ),
    )


def _owned(
    runs: Sequence[RunRow], columns: Sequence[Any], where: ColumnElement[bool], name: str
) -> Subquery:
    """`columns` and the owning run's id (`owner`) of the runs' spans matching `where`: by run
    id, and by trace id for spans that name no run (two indexed selects, not one OR)."""
    spans: Any = SpanRow
    owner_of_trace = case(
        {run.trace_id: literal(run.id) for run in runs}, value=spans.trace_id, else_=None
    )
    by_run = select(*columns, spans.run_id.label("owner")).where(
        spans.run_id.in_([run.id for run in runs]), where
    )
    # "names no run" as an expression, not `run_id IS NULL`: SQLite would answer that from
    # ix_spans_run_start, reading every run-less span of the database, instead of ix_spans_trace.
    by_trace = select(*columns, owner_of_trace.label("owner")).where(
        spans.trace_id.in_([run.trace_id for run in runs]),
        func.coalesce(spans.run_id, "") == "",
        where,
    )
    return union_all(by_run, by_trace).subquery(name)


def _loads(text: str | None) -> Any:
    if text is None:
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN or Infinity, written by the standard library
        return json.loads(text)


def _span(row: Any) -> SpanDict:
    return {
        "span_id": row.span_id,
        "name": row.name,
        "start_time_unix_nano": row.start_ns,
        "end_time_unix_nano": row.end_ns,
        "status": {"code": row.status_code, "message": row.status_message},
        "attributes": _loads(row.attributes),
    }


def first_agent_calls(store: Store, runs: Sequence[RunRow], limit: int) -> TrialCalls:
    """The first `limit` agent calls of each run (by start time, then span id), its turn spans
    (the comparison tags calls with their turn), its total number of agent calls and the id of
    its call number `limit + 1`.

    A span comes as id, name, times, status and attributes: what the comparison reads (not
    `resource`, which is stored after the payloads: reading it walks every large span's
    overflow pages in SQLite)."""
    found = TrialCalls(spans={run.id: [] for run in runs}, totals={run.id: 0 for run in runs})
    if not runs:
        return found
    spans: Any = SpanRow
    owned = _owned(runs, (spans.span_id, spans.start_ns), is_agent_call_sql(), "calls")
    order = (owned.c.start_ns, owned.c.span_id)
    ranked = select(
        owned.c.span_id,
        owned.c.owner,
        func.row_number().over(partition_by=owned.c.owner, order_by=order).label("position"),
        # the same window order with the whole partition as frame: one sort serves both
        func.count()
        .over(partition_by=owned.c.owner, order_by=order, rows=(None, None))
        .label("total"),
    ).subquery("ranked")
    payload = (
        spans.span_id,
        spans.name,
        spans.start_ns,
        spans.end_ns,
        spans.status_code,
        spans.status_message,
        cast(spans.attributes, Text).label("attributes"),
    )
    shown = (
        select(*payload, ranked.c.owner, ranked.c.total, ranked.c.position)
        .join(ranked, ranked.c.span_id == spans.span_id)
        .where(ranked.c.position <= limit + 1)
    )
    # Turn spans are few (one per user turn): role-less spans named "turn N".
    turn_like = spans.role.is_(None) & spans.name.like("turn %")
    turns = select(_owned(runs, payload, turn_like, "turns"))
    with store.engine.connect() as connection:
        for row in connection.execute(shown):
            found.totals[row.owner] = int(row.total)
            if row.position > limit:
                found.next_call[row.owner] = row.span_id
            else:
                found.spans[row.owner].append(_span(row))
        for row in connection.execute(turns):
            found.spans[row.owner].append(_span(row))
    for run_spans in found.spans.values():
        run_spans.sort(key=lambda s: (s["start_time_unix_nano"], s["span_id"]))
    return found
