"""The viewer's queries: experiments, suites, filter suggestions, trace outlines (the runs
list's own query is `tracecard.traces.run_list.find_runs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BigInteger, String, case, cast, false, func, select, type_coerce

from tracecard.traces import semconv
from tracecard.traces.models import U64, ExperimentRow, RunRow, ScoreRow, SpanRow, SuiteRow
from tracecard.traces.store import Store

__all__ = [
    "FilterChoices",
    "experiment_counts",
    "experiment_runs",
    "filter_choices",
    "find_suite",
    "get_experiment",
    "get_suite",
    "list_experiments",
    "list_suites",
    "run_id_of_trace",
    "runs_by_id",
    "trace_outline",
]



@dataclass
class FilterChoices:
    """Values seen in the store, offered as suggestions by the runs filters."""

    tasks: list[str] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    error_types: list[str] = field(default_factory=list)


def runs_by_id(store: Store, run_ids: Sequence[str]) -> list[RunRow]:
    """The runs with these ids, in the order asked (unknown ids are left out)."""
    if not run_ids:
        return []
    runs: Any = RunRow
    with store.session() as session:
        found = {r.id: r for r in session.scalars(select(RunRow).where(runs.id.in_(run_ids)))}
    return [found[i] for i in run_ids if i in found]


def list_experiments(
    store: Store, limit: int = 200, offset: int = 0, suite: str | None = None
) -> list[ExperimentRow]:
    """The most recent experiments first (of one suite, by name or version, if given)."""
    experiments: Any = ExperimentRow
    query = select(ExperimentRow)
    if suite is not None:
        query = query.where(
            (experiments.suite_name == suite) | (experiments.suite_version == suite)
        )
    query = query.order_by(experiments.created_at.desc(), experiments.id).offset(offset)
    query = query.limit(limit)
    with store.session() as session:
        return list(session.scalars(query))


def get_experiment(store: Store, experiment_id: str) -> ExperimentRow | None:
    """One experiment by id."""
    with store.session() as session:
        return session.get(ExperimentRow, experiment_id)


def get_suite(store: Store, version: str) -> SuiteRow | None:
    """One stored suite document by its version (content hash)."""
    with store.session() as session:
        return session.get(SuiteRow, version)


def find_suite(store: Store, ref: str) -> SuiteRow | None:
    """A stored suite by exact version, else by name (its latest version), else by a version
    prefix of at least 8 characters."""
    suites: Any = SuiteRow
    with store.session() as session:
        row = session.get(SuiteRow, ref)
        if row is None:
            by_name = select(SuiteRow).where(suites.name == ref)
            row = session.scalars(by_name.order_by(suites.created_at.desc())).first()
        if row is None and len(ref) >= 8:
            by_prefix = select(SuiteRow).where(suites.version.startswith(ref))
            row = session.scalars(by_prefix).first()
    return row


def list_suites(store: Store) -> list[SuiteRow]:
    """Every stored suite document, newest first."""
    suites: Any = SuiteRow
    with store.session() as session:
        return list(session.scalars(select(SuiteRow).order_by(suites.created_at.desc())))


def run_id_of_trace(store: Store, trace_id: str) -> str | None:
    """The run a trace belongs to: the run whose trace it is, else the run named by any stored
    span of that trace."""
    run = store.run_for_trace(trace_id)
    if run is not None:
        return run.id
    spans: Any = SpanRow
    query = (
        select(spans.run_id)
        .where(spans.trace_id == trace_id, spans.run_id.is_not(None))
        .limit(1)
    )
    with store.session() as session:
        found = session.scalars(query).first()
    return str(found) if found is not None else None


def experiment_runs(
    store: Store, experiment_id: str, task_id: str | None = None
) -> list[RunRow]:
    """The runs of an experiment (optionally of one task), by task and trial."""
    runs: Any = RunRow
    query = select(RunRow).where(runs.experiment_id == experiment_id)
    if task_id is not None:
        query = query.where(runs.task_id == task_id)
    query = query.order_by(runs.task_id, runs.trial, runs.id)
    with store.session() as session:
        return list(session.scalars(query))


def filter_choices(store: Store, limit: int = 200) -> FilterChoices:
    """Distinct tasks, configs, tools and error types, for the filters' suggestions."""
    runs: Any = RunRow
    spans: Any = SpanRow

    def distinct(column: Any) -> list[str]:
        query = select(column).where(column.is_not(None)).distinct().order_by(column).limit(limit)
        return [str(v) for v in session.scalars(query)]

    with store.session() as session:
        return FilterChoices(
            tasks=distinct(runs.task_id),
            configs=distinct(runs.config_name),
            tools=distinct(spans.tool_name),
            error_types=distinct(spans.error_type),
        )


def experiment_counts(store: Store, experiment_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Per experiment: (runs, runs whose outcome failed)."""
    if not experiment_ids:
        return {}
    runs: Any = RunRow
    scores: Any = ScoreRow
    failed = (
        select(scores.run_id)
        .where(scores.component == "outcome", scores.passed == false())
        .scalar_subquery()
    )
    total = (
        select(runs.experiment_id, func.count())
        .where(runs.experiment_id.in_(experiment_ids))
        .group_by(runs.experiment_id)
    )
    failing = (
        select(runs.experiment_id, func.count())
        .where(runs.experiment_id.in_(experiment_ids), runs.id.in_(failed))
        .group_by(runs.experiment_id)
    )
    with store.session() as session:
        counts = {str(e): int(n) for e, n in session.execute(total)}
        fails = {str(e): int(n) for e, n in session.execute(failing)}
    return {e: (counts.get(e, 0), fails.get(e, 0)) for e in experiment_ids}


def trace_outline(store: Store, run: RunRow) -> list[dict[str, Any]]:
    """A run's spans in start order, without their payloads: those with the run's id, and
    those of the run's trace that name no run (an agent's own OTLP spans).

    The shape is the JSON API's, but `attributes` holds only the columns copied out of them
    (tool name, error type, role) plus `tracecard.evidence` of role-less spans (the waterfall
    marks agent-reported spans), `tracecard.probe.id` of verifier spans (a probe, apart from
    its MCP client's own traffic) and `tracecard.probe` of a `server/discover` (a version
    probe), `resource` only `service.name`, and `events` only on spans that have some (the
    waterfall ticks them on every bar): the waterfall needs no arguments or results, and not
    parsing them is what keeps a 5,000-span trace page fast. Details are fetched per span on
    demand.
    """
    spans: Any = SpanRow
    columns = (
        spans.span_id,
        spans.trace_id,
        spans.parent_span_id,
        spans.run_id,
        spans.name,
        spans.kind,
        # plain integers: the wrapped (year 2262+) values are unwrapped below, without a
        # TypeDecorator call per value
        type_coerce(spans.start_ns, BigInteger),
        type_coerce(spans.end_ns, BigInteger),
        spans.status_code,
        spans.status_message,
        spans.tool_name,
        spans.error_type,
        spans.role,
        # Columns stored after the payloads are read only when needed: a proxy span (it has a
        # role) never makes SQLite walk past its arguments and result to reach `resource`.
        case((spans.role.is_(None), spans.resource["service.name"].as_string()), else_=None),
        # only a role-less span can be agent-reported (ingest drops a claimed role)
        case((spans.role.is_(None), spans.attributes[semconv.EVIDENCE].as_string()), else_=None),
        # a verifier span's probe id (a probe, not its MCP client's traffic), a server/discover's
        # `tracecard.probe` (a version probe, not an error): few spans, cheap
        case(
            (spans.role == semconv.ROLE_VERIFIER, spans.attributes[semconv.PROBE_ID].as_string()),
            (spans.name == "server/discover", spans.attributes[semconv.PROBE].as_string()),
            else_=None,
        ),
        # most spans have no events: only those that have some are parsed
        case((cast(spans.events, String) != "[]", spans.events), else_=None),
    )
    # The agent's own OTLP spans join by trace id when they name no run. Two indexed queries:
    # an OR of both conditions makes SQLite read every row twice and sort out duplicates.
    by_run = select(*columns).where(spans.run_id == run.id)
    by_trace = select(*columns).where(spans.trace_id == run.trace_id, spans.run_id.is_(None))
    with store.engine.connect() as connection:
        rows = {row[0]: tuple(row) for row in connection.execute(by_run)}
        for row in connection.execute(by_trace):
            rows.setdefault(row[0], tuple(row))
    outline = []
    tool_key, error_key, role_key = semconv.GEN_AI_TOOL_NAME, semconv.ERROR_TYPE, semconv.ROLE
    evidence_key = semconv.EVIDENCE
    for (
        span_id, trace_id, parent, run_id, name, kind, start, end, code, message,
        tool, error, role, service, evidence, probe, events,
    ) in rows.values():  # fmt: skip
        attributes = {}
        if tool is not None:
            attributes[tool_key] = tool
        if error is not None:
            attributes[error_key] = error
        if role is not None:
            attributes[role_key] = role
        if evidence is not None:
            attributes[evidence_key] = evidence
        if probe is not None:
            attributes[semconv.PROBE_ID if role == semconv.ROLE_VERIFIER else semconv.PROBE] = probe
        if start < 0:
            start += U64
        if end is not None and end < 0:
            end += U64
        span: dict[str, Any] = {
            "trace_id": trace_id,
            "span_id": span_id,
            "parent_span_id": parent,
            "run_id": run_id,
            "name": name,
            "kind": kind,
            "start_time_unix_nano": start,
            "end_time_unix_nano": end,
            "status": {"code": code, "message": message},
            "attributes": attributes,
            "resource": {"service.name": service} if service is not None else {},
        }
        if events:
            span["events"] = events
        outline.append(span)
    outline.sort(key=_start_order)
    return outline


def _start_order(span: dict[str, Any]) -> tuple[int, str]:
    return span["start_time_unix_nano"], span["span_id"]
