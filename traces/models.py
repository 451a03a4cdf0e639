"""SQLModel tables: runs, spans, suites, experiments, scores, verdicts.

Stored the way Phoenix stores spans: hex-string ids, UTC times, JSON columns for attributes,
idempotent inserts on span id and no foreign key on the parent (children may arrive first).
Table models do not validate; input is validated by separate non-table models upstream.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Dialect,
    Index,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlmodel import Field, SQLModel

U64 = 1 << 64
# The longest component name the scores and verdicts tables hold (migration c5e7a2d94b31);
# the scorer registry refuses longer ones (tracecard.scorers.registry.MAX_COMPONENT_LENGTH).
COMPONENT_MAX_LENGTH = 128
_I64_MAX = (1 << 63) - 1


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


# Default factories are Python functions, not `list` and `dict`: pydantic inspects a factory's
# signature on every construction, and a builtin's signature is parsed from its text (57 us,
# tokenize and compile) where a function's is read from its code (4 us): a `RunRow` with its
# defaults cost 222 us to build, most of it there.
def empty_list() -> list[Any]:
    """A new empty list (a default factory)."""
    return []


def empty_dict() -> dict[str, Any]:
    """A new empty dict (a default factory)."""
    return {}


def nanos_to_db(value: int) -> int:
    """An OTLP time (unsigned 64-bit) as the signed 64-bit integer both databases store: values
    at or above 2^63 wrap to negative (two's complement), which no real time is."""
    if not 0 <= value < U64:
        raise ValueError(f"{value} is not an unsigned 64-bit time in nanoseconds")
    return value - U64 if value > _I64_MAX else value


def _non_null(column: str) -> dict[str, Any]:
    """A partial index's condition on both databases: only rows where `column` is set."""
    where = text(f"{column} IS NOT NULL")
    return {"sqlite_where": where, "postgresql_where": where}


def nanos_from_db(value: int) -> int:
    return value + U64 if value < 0 else value


class UnixNanos(TypeDecorator[int]):
    """A BIGINT holding an unsigned 64-bit time without loss (see `nanos_to_db`). SQL ordering
    puts the (year 2262+) wrapped values first; Python-side sorts see the true values."""

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: int | None, dialect: Dialect) -> int | None:
        return None if value is None else nanos_to_db(int(value))

    def process_result_value(self, value: int | None, dialect: Dialect) -> int | None:
        return None if value is None else nanos_from_db(int(value))


class RunRow(SQLModel, table=True):
    """One trial of one task, or an ad-hoc run for traffic that named none."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_experiment_task_trial", "experiment_id", "task_id", "trial"),
        Index("ix_runs_created_desc", "created_at"),
        Index("ix_runs_status_created", "status", "created_at"),
        Index("ix_runs_trace", "trace_id"),
        Index("ix_runs_adhoc_key", "adhoc_key"),
        # the runs list's sort orders (keyset pages on (column, id))
        Index("ix_runs_duration", "duration_ms", "id"),
        Index("ix_runs_calls", "calls", "id"),
        Index("ix_runs_errors", "errors", "id"),
        Index("ix_runs_tokens", "tokens", "id"),
        # `status=failed` (and the other verdicts) newest first, and their count, in the index
        Index("ix_runs_verdict_created", "score_verdict", "created_at", "status"),
    )

    id: str = Field(primary_key=True, max_length=32)
    experiment_id: str | None = Field(default=None, max_length=32)
    suite_name: str | None = None
    suite_version: str | None = Field(default=None, max_length=64)
    task_id: str | None = None
    trial: int = 0
    config_name: str = "adhoc"
    config: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column(JSON, nullable=False)
    )
    status: str = Field(default="pending", max_length=16)
    final_answer: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    trace_id: str = Field(max_length=32)
    root_span_id: str = Field(max_length=16)
    sandbox: str | None = None
    adhoc_key: str | None = None
    flags: list[str] = Field(default_factory=empty_list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # What the runs list shows, summarised from the run's spans when it ends
    # (`tracecard.traces.run_summary`); a run still going is summarised when shown.
    client: str | None = Field(default=None, max_length=200)  # clientInfo `name/version`
    upstreams: list[str] = Field(default_factory=empty_list, sa_column=Column(JSON, nullable=False))
    calls: int = 0  # the agent's tool calls
    errors: int = 0  # the agent's calls that failed (a version probe is not one)
    tokens: int = 0  # model tokens, input + output, of the run's `chat` spans
    duration_ms: int = 0  # first recorded message to the last one's end
    end_reason: str | None = Field(default=None, max_length=32)  # ad hoc: deleted, idle, shutdown
    # What the run's scores alone say (`tracecard.scorers.verdict.scores_verdict`: passed, failed,
    # not_evaluated), written with the scores; the run's verdict adds its status to it.
    score_verdict: str = Field(default="not_evaluated", max_length=16)


class SpanRow(SQLModel, table=True):
    """One OpenTelemetry span; `run_id`, `tool_name`, `error_type`, `role` are copied out of the
    attributes so that the viewer's filters are index lookups."""

    __tablename__ = "spans"
    __table_args__ = (
        Index("ix_spans_run_start", "run_id", "start_ns"),
        Index("ix_spans_trace", "trace_id"),
        # partial: most spans name no tool and no error, and no query looks those up
        Index("ix_spans_tool", "tool_name", "run_id", **_non_null("tool_name")),
        Index("ix_spans_error", "error_type", "run_id", **_non_null("error_type")),
    )

    span_id: str = Field(primary_key=True, max_length=16)
    trace_id: str = Field(max_length=32)
    parent_span_id: str | None = Field(default=None, max_length=16)
    run_id: str | None = Field(default=None, max_length=32)
    name: str
    kind: int = 0
    start_ns: int = Field(sa_column=Column(UnixNanos, nullable=False))
    end_ns: int | None = Field(default=None, sa_column=Column(UnixNanos))
    status_code: int = 0
    status_message: str | None = None
    tool_name: str | None = None
    error_type: str | None = None
    role: str | None = Field(default=None, max_length=16)
    attributes: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column(JSON, nullable=False)
    )
    events: list[dict[str, Any]] = Field(
        default_factory=empty_list, sa_column=Column(JSON, nullable=False)
    )
    resource: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column(JSON, nullable=False)
    )
    scope: str | None = None
    # OTel span links [{trace_id, span_id, attributes}]: a tool span's link to the model span
    # that requested its call (docs/llm.md#links)
    links: list[dict[str, Any]] = Field(
        default_factory=empty_list, sa_column=Column(JSON, nullable=False, server_default="[]")
    )


class SuiteRow(SQLModel, table=True):
    """A suite document; its content hash is its version."""

    __tablename__ = "suites"
    __table_args__ = (Index("ix_suites_name_created", "name", "created_at"),)

    version: str = Field(primary_key=True, max_length=64)
    name: str
    document: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class ExperimentRow(SQLModel, table=True):
    """One config on one suite with k trials per task."""

    __tablename__ = "experiments"
    __table_args__ = (Index("ix_experiments_created", "created_at"),)

    id: str = Field(primary_key=True, max_length=32)
    suite_name: str
    suite_version: str = Field(max_length=64)
    config_name: str
    config: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column(JSON, nullable=False)
    )
    trials: int
    # replay source and fault plan (server/replay, server/faults); None: a live experiment
    environment: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)


class ScoreRow(SQLModel, table=True):
    """Run x component. `value` None means "not evaluated", never a pass."""

    __tablename__ = "scores"
    __table_args__ = (
        UniqueConstraint("run_id", "component", name="uq_scores_run_component"),
        Index("ix_scores_component_passed_run", "component", "passed", "run_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(max_length=32)
    component: str = Field(max_length=COMPONENT_MAX_LENGTH)
    value: float | None = None
    passed: bool | None = None
    evidence: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column(JSON, nullable=False)
    )
    scorer: str
    scorer_version: str
    suite_version: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class VerdictRow(SQLModel, table=True):
    """A person's judgement of a run's component, stored apart from the scores."""

    __tablename__ = "verdicts"
    __table_args__ = (Index("ix_verdicts_run", "run_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(max_length=32)
    component: str = Field(max_length=COMPONENT_MAX_LENGTH)
    agree: bool
    note: str | None = Field(default=None, sa_column=Column(Text))
    author: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class SecretRow(SQLModel, table=True):
    """A random key created once per database (fingerprint redaction, the verifier's role).

    Never copied into spans or exports; every tracecard process on one database shares it.
    """

    __tablename__ = "secrets"

    name: str = Field(primary_key=True, max_length=64)
    value: str = Field(max_length=128)  # hex
    created_at: datetime = Field(default_factory=utcnow)


class JobAttemptRow(SQLModel, table=True):
    """One attempt at an (experiment, task, trial) cell run as a durable job (server/jobs): the
    run it used, the worker that started its agent, and how the attempt ended. A cell's later
    attempt supersedes an earlier one; an attempt its worker never finished is `lost`."""

    __tablename__ = "job_attempts"
    __table_args__ = (Index("ix_job_attempts_cell", "experiment_id", "task_id", "trial"),)

    run_id: str = Field(primary_key=True, max_length=32)
    experiment_id: str = Field(max_length=32)
    task_id: str
    trial: int = 0
    attempt: int = 1
    executor: str = Field(max_length=64)  # the DBOS executor id of the worker
    host: str | None = Field(default=None, max_length=200)
    state: str = Field(default="running", max_length=16)  # running | ended | lost
    reason: str | None = Field(default=None, sa_column=Column(Text))
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None


class JobBackoffRow(SQLModel, table=True):
    """A limits key backed off after its model upstream answered 429: no worker's proxy sends
    that upstream a request before `until` (tracecard.server.jobs.backoff)."""

    __tablename__ = "job_backoffs"

    key: str = Field(primary_key=True, max_length=200)  # `model:NAME`
    until: datetime
    hits: int = 0  # 429s in a row: the next delay without a Retry-After doubles
    updated_at: datetime = Field(default_factory=utcnow)


class JobWorkerRow(SQLModel, table=True):
    """A `tracecard worker` (or the in-process worker of `tracecard run`): its heartbeat says it
    is alive; a worker whose heartbeat stopped has its cells recovered by another, once."""

    __tablename__ = "job_workers"
    __table_args__ = (Index("ix_job_workers_heartbeat", "heartbeat_at"),)

    id: str = Field(primary_key=True, max_length=64)  # its DBOS executor id
    host: str = Field(max_length=200)
    pid: int = 0
    tags: list[str] = Field(default_factory=empty_list, sa_column=Column(JSON, nullable=False))
    concurrency: int = 1
    running: int = 0  # cells whose agent it runs now
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime = Field(default_factory=utcnow)
    stopped_at: datetime | None = None
    recovered_by: str | None = Field(default=None, max_length=64)


class InfraFailureRow(SQLModel, table=True):
    """A per-run upstream of a run that never started (`sandbox_failed` |
    `upstream_never_started`), written when it happens by the process serving the run's proxy,
    so whichever process finishes the run or closes its lost attempt ends it with that reason
    (tracecard.traces.infra_failures). A later good start of the same upstream deletes it."""

    __tablename__ = "run_infra_failures"

    run_id: str = Field(primary_key=True, max_length=32)
    upstream: str = Field(primary_key=True, max_length=200)
    reason: str = Field(max_length=32)
    why: str = Field(sa_column=Column(Text, nullable=False))
    recorded_at: datetime = Field(default_factory=utcnow)
