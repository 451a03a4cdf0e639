"""Runs: creation, the in-memory registry the proxy resolves runs from, root spans.

The proxy's hot path resolves a run from memory; only a run it has never seen (created by another
process) costs one database read, after which it is cached. Ad-hoc runs are created in memory and
written to the database in the background.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from tracecard.server.run_threads import in_thread
from tracecard.traces import semconv
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store

log = logging.getLogger(__name__)


def client_label(client: dict[str, Any] | None) -> str | None:
    """`name/version` of a client's `clientInfo` (what the runs list shows), or None."""
    if not client or not client.get("name"):
        return None
    version = client.get("version")
    return f"{client['name']}/{version}"[:200] if version else str(client["name"])[:200]


def new_run_id() -> str:
    return secrets.token_hex(8)


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_span_id() -> str:
    return secrets.token_hex(8)


@dataclass
class RunInfo:
    """What the proxy needs of a run, kept in memory."""

    id: str
    trace_id: str
    root_span_id: str
    config_name: str = "adhoc"
    status: str = "pending"
    task_id: str | None = None
    experiment_id: str | None = None
    sandbox: str | None = None
    created_ns: int = field(default_factory=time.time_ns)
    adhoc: bool = False  # made up for traffic that named no run (its trace is whatever came)
    adhoc_key: str | None = None  # what the ad-hoc run was grouped by (session, trace, client)
    last_seen: float = field(default_factory=time.monotonic)  # an ad-hoc run's latest request
    client: dict[str, Any] | None = None  # the client's `clientInfo` (name, version), if sent
    probe_only: bool = False  # an ad-hoc run that has seen only a `server/discover` probe
    _context: Context | None = None
    _turn_context: Context | None = None  # the open turn span of a multi-turn run

    @classmethod
    def from_row(cls, row: RunRow) -> RunInfo:
        created = row.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        return cls(
            id=row.id,
            trace_id=row.trace_id,
            root_span_id=row.root_span_id,
            config_name=row.config_name,
            status=row.status,
            task_id=row.task_id,
            experiment_id=row.experiment_id,
            sandbox=row.sandbox,
            created_ns=int(created.timestamp() * 1e9),
            adhoc=row.adhoc_key is not None,
            adhoc_key=row.adhoc_key,
        )

    def enter_turn(self, context: Context | None) -> None:
        """Parent the run's next proxied spans on a turn span (None: on the root again)."""
        self._turn_context = context

    @property
    def root_context(self) -> Context:
        """An OTel context whose current span is this run's root span."""
        return self._root_context()

    @property
    def context(self) -> Context:
        """The parent of proxy spans: the open turn's span, else the run's root."""
        return self._turn_context or self._root_context()

    def _root_context(self) -> Context:
        if self._context is None:
            span_context = SpanContext(
                trace_id=int(self.trace_id, 16),
                span_id=int(self.root_span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            self._context = trace.set_span_in_context(NonRecordingSpan(span_context))
        return self._context


class RunRegistry:
    """Runs by id and ad-hoc runs by key (MCP session id or client), backed by the store."""

    def __init__(self, store: Store, capacity: int = 20000) -> None:
        self._store = store
        self._by_id: OrderedDict[str, RunInfo] = OrderedDict()
        # key -> ad-hoc run, least recently used first; bounded like the run cache, because a
        # stateless client's key (address + user agent) never says goodbye
        self._adhoc: OrderedDict[str, RunInfo] = OrderedDict()
        self._capacity = capacity
        self._pending_writes: set[asyncio.Task[None]] = set()
        # every ad-hoc run still running, by id: what the idle sweep and shutdown end
        self._live: dict[str, RunInfo] = {}

    def remember(self, info: RunInfo) -> RunInfo:
        self._by_id[info.id] = info
        self._by_id.move_to_end(info.id)
        while len(self._by_id) > self._capacity:
            self._by_id.popitem(last=False)
        return info

    def cached(self, run_id: str) -> RunInfo | None:
        return self._by_id.get(run_id)

    async def resolve(self, run_id: str) -> RunInfo | None:
        """The run with this id, from memory, else from the database once."""
        info = self._by_id.get(run_id)
        if info is not None:
            return info
        row = await anyio.to_thread.run_sync(self._store.get_run, run_id)
        return self.remember(RunInfo.from_row(row)) if row is not None else None

    def adhoc(
        self,
        key: str,
        config_name: str = "adhoc",
        *,
        trace_id: str | None = None,
        client: dict[str, Any] | None = None,
    ) -> RunInfo:
        """The ad-hoc run for `key`, created in memory now and stored in the background.

        `trace_id`: the agent's own trace, when the run is grouped by it (its spans are there)."""
        info = self._adhoc.get(key)
        if info is not None:
            self._adhoc.move_to_end(key)
            info.last_seen = time.monotonic()
            return info
        info = RunInfo(
            id=new_run_id(),
            trace_id=trace_id or new_trace_id(),
            root_span_id=new_span_id(),
            config_name=config_name,
            status="running",
            adhoc=True,
            adhoc_key=key,
            client=client,
        )
        self._adhoc[key] = info
        self._live[info.id] = info
        while len(self._adhoc) > self._capacity:
            self._adhoc.popitem(last=False)  # its next call opens a new ad-hoc run
        self.remember(info)
        now = datetime.now(UTC)
        fields = {
            "id": info.id,
            "trace_id": info.trace_id,
            "root_span_id": info.root_span_id,
            "config_name": config_name,
            "status": "running",
            "adhoc_key": key,
            "client": client_label(client),
            "created_at": now,
            "started_at": now,
        }
        task = asyncio.get_running_loop().create_task(self._write(fields))
        self._pending_writes.add(task)
        task.add_done_callback(self._pending_writes.discard)
        return info

    def cached_adhoc(self, key: str) -> RunInfo | None:
        """The live ad-hoc run of `key`, if there is one (not refreshed)."""
        return self._adhoc.get(key)

    def live_adhoc(self) -> list[RunInfo]:
        """The ad-hoc runs still running (oldest request first)."""
        return sorted(self._live.values(), key=lambda info: info.last_seen)

    def adhoc_ended(self, info: RunInfo) -> bool:
        """Mark an ad-hoc run over: its key opens a new run from now on. False if it was."""
        if self._live.pop(info.id, None) is None:
            return False
        info.status = "finished"
        if info.adhoc_key is not None and self._adhoc.get(info.adhoc_key) is info:
            del self._adhoc[info.adhoc_key]
        return True

    def rekey_adhoc(self, info: RunInfo, key: str) -> None:
        """Move a live ad-hoc run to another key (a probe's run adopted by the session after)."""
        if info.adhoc_key is not None and self._adhoc.get(info.adhoc_key) is info:
            del self._adhoc[info.adhoc_key]
        info.adhoc_key = key
        self._adhoc[key] = info

    async def _write(self, fields: dict[str, Any]) -> None:
        """Store an ad-hoc run's row, in a worker thread: one Core insert of its fields and the
        model's defaults (a `RunRow` through the ORM cost ~1 ms of CPU a session)."""
        try:
            await in_thread(self._store.insert_run, fields)
        except Exception:
            log.exception("could not store ad-hoc run %s", fields["id"])

    async def drain(self) -> None:
        """Wait for background run writes (on shutdown, and before reading runs back)."""
        if self._pending_writes:
            await asyncio.gather(*list(self._pending_writes), return_exceptions=True)

    def forget_adhoc(self, key: str, info: RunInfo | None = None) -> RunInfo | None:
        """Drop the key's entry (only if it is `info`'s, when given); the run stays live."""
        found = self._adhoc.get(key)
        if found is None or (info is not None and found is not info):
            return None
        return self._adhoc.pop(key)


def root_span(
    run: RunRow,
    *,
    end_ns: int,
    events: list[Event] | None = None,
    resource: Resource,
    start_ns: int | None = None,
) -> ReadableSpan:
    """The run's root span `invoke_agent {config}`, built with the run's own ids."""
    context = SpanContext(
        trace_id=int(run.trace_id, 16),
        span_id=int(run.root_span_id, 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    created = run.created_at if run.created_at.tzinfo else run.created_at.replace(tzinfo=UTC)
    # from the run's first recorded message when known: a run may wait in a queue after creation
    start_ns = start_ns or int(created.timestamp() * 1e9)
    attributes: dict[str, Any] = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
        semconv.RUN_ID: run.id,
        semconv.RUN_STATUS: run.status,
        "gen_ai.agent.name": run.config_name,
    }
    if run.task_id:
        attributes["tracecard.task.id"] = run.task_id
        attributes["tracecard.trial"] = run.trial
    if run.experiment_id:
        attributes["tracecard.experiment.id"] = run.experiment_id
    if run.final_answer is not None:
        attributes[semconv.FINAL_ANSWER] = run.final_answer
    if run.sandbox:
        attributes[semconv.SANDBOX_PATH] = run.sandbox
    ok = run.status == "finished"
    return ReadableSpan(
        name=f"{semconv.OP_INVOKE_AGENT} {run.config_name}",
        context=context,
        parent=None,
        resource=resource,
        attributes=attributes,
        events=events or [],
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.UNSET if ok else StatusCode.ERROR, None if ok else run.status),
        start_time=start_ns,
        end_time=max(end_ns, start_ns),
        instrumentation_scope=InstrumentationScope("tracecard"),
    )


def emit(processor: SpanProcessor, span: ReadableSpan) -> None:
    """Hand a finished span straight to the processor (it goes out with the next batch)."""
    processor.on_end(span)
