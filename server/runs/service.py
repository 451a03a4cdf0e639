"""Run lifecycle: create a run (with its proxy URLs), finish it (root span, probes, scores)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from tracecard.scorers.types import FINAL_STATUSES
from tracecard.server.errors import RunError as RunError  # (its old home)
from tracecard.server.runs.registry import (
    RunInfo,
    client_label,
    emit,
    new_run_id,
    new_span_id,
    new_trace_id,
    root_span,
)
from tracecard.server.runtime import Runtime
from tracecard.server.settings import MODEL_KINDS
from tracecard.traces import infra_failures
from tracecard.traces.models import RunRow
from tracecard.traces.run_summary import end_run


class RunCreate(BaseModel):
    """Body of `POST /api/runs`."""

    model_config = ConfigDict(extra="forbid")

    task_id: str | None = None
    suite: str | None = None
    experiment_id: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    trial: int = 0


class RunFinish(BaseModel):
    """Body of `POST /api/runs/{id}/finish`."""

    model_config = ConfigDict(extra="forbid")

    final_answer: str | None = None
    status: str = "finished"
    error: str | None = Field(default=None, max_length=20_000)  # why it did not finish


# Hooks other features register on the runtime: `finish_hooks` (probes, scoring) run first and
# may return fields for the response; `after_finish_hooks` (stop per-run upstreams) run next.
FinishHook = Callable[[Runtime, RunRow], Awaitable[dict[str, Any] | None]]


def run_urls(runtime: Runtime, run_id: str) -> dict[str, str]:
    """One proxy URL per configured upstream, with the run in the path."""
    base = runtime.settings.base_url
    urls: dict[str, str] = {}
    for name, upstream in runtime.settings.upstreams.items():
        if upstream.kind in MODEL_KINDS:  # a base URL for the model SDK (docs/llm.md)
            urls[name] = f"{base}/runs/{run_id}/llm/{name}"
            continue
        kind = "http" if upstream.kind == "http" else "mcp"
        urls[name] = f"{base}/runs/{run_id}/{kind}/{name}" + ("/" if kind == "http" else "")
    return urls


def model_kinds(runtime: Runtime) -> dict[str, str]:
    """The model upstreams (`/llm/` URLs among the run's urls) and their API kind."""
    upstreams = runtime.settings.upstreams
    return {name: u.kind for name, u in upstreams.items() if u.kind in MODEL_KINDS}


def run_view(runtime: Runtime, run: RunRow, **extra: Any) -> dict[str, Any]:
    """A run as the API returns it."""
    view = {
        "id": run.id,
        "experiment_id": run.experiment_id,
        "suite": run.suite_name,
        "suite_version": run.suite_version,
        "task_id": run.task_id,
        "trial": run.trial,
        "config": {"name": run.config_name, **run.config},
        "status": run.status,
        "final_answer": run.final_answer,
        "error": run.error,
        "trace_id": run.trace_id,
        "root_span_id": run.root_span_id,
        "sandbox": run.sandbox,
        "flags": run.flags,
        "client": run.client,
        "upstreams": run.upstreams,
        "calls": run.calls,
        "errors": run.errors,
        "tokens": run.tokens,
        "duration_ms": run.duration_ms,
        "end_reason": run.end_reason,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "urls": run_urls(runtime, run.id),
        "models": model_kinds(runtime),
        "viewer_url": f"{runtime.settings.base_url}/runs/{run.id}",
    }
    view.update(extra)
    return view


def new_run_row(
    *,
    config: dict[str, Any],
    task_id: str | None = None,
    trial: int = 0,
    experiment_id: str | None = None,
    suite_name: str | None = None,
    suite_version: str | None = None,
) -> RunRow:
    config = dict(config)
    name = str(config.pop("name", None) or "default")
    return RunRow(
        id=new_run_id(),
        experiment_id=experiment_id,
        suite_name=suite_name,
        suite_version=suite_version,
        task_id=task_id,
        trial=trial,
        config_name=name,
        config=config,
        status="pending",
        trace_id=new_trace_id(),
        root_span_id=new_span_id(),
    )


async def create_run(runtime: Runtime, body: RunCreate) -> RunRow:
    """Store a new run and make it known to the proxy."""
    resolver = runtime.hooks.resolve_run_create
    if resolver is not None:  # suites/experiments fill in task and suite details
        row: RunRow = await resolver(runtime, body)
    else:
        row = new_run_row(config=body.config, task_id=body.task_id, trial=body.trial)
    await anyio.to_thread.run_sync(runtime.store.add_run, row)
    runtime.runs.remember(RunInfo.from_row(row))
    return row


async def get_run(runtime: Runtime, run_id: str) -> RunRow:
    await runtime.runs.drain()
    row = await anyio.to_thread.run_sync(runtime.store.get_run, run_id)
    if row is None:
        raise RunError(f"no run with id {run_id!r}", 404)
    return row


async def finish_run(runtime: Runtime, run_id: str, body: RunFinish) -> dict[str, Any]:
    """Mark the run ended, run the finish hooks (probes, scoring), emit its root span."""
    if body.status not in FINAL_STATUSES:
        raise RunError(f"status must be one of {', '.join(FINAL_STATUSES)}, not {body.status!r}")
    row = await get_run(runtime, run_id)
    if row.status in FINAL_STATUSES:
        raise RunError(
            f"run {run_id} already ended with status {row.status!r}; "
            f"use POST /api/runs/{run_id}/rescore to score it again",
            409,
        )
    fields: dict[str, Any] = {
        "status": body.status,
        "final_answer": body.final_answer,
        "error": body.error,
        "finished_at": datetime.now(UTC),
    }
    # a per-run upstream that never started, recorded by whichever process served the run
    failed = await anyio.to_thread.run_sync(infra_failures.of_run, runtime.store, run_id)
    if failed is not None:  # not the agent's failure: errored with the reason, never scored
        fields.update(status="errored", error=f"{failed[0]}: {failed[1]}", end_reason=failed[0])
    updated = await anyio.to_thread.run_sync(lambda: runtime.store.update_run(run_id, **fields))
    assert updated is not None
    info = runtime.runs.cached(run_id)
    if info is not None:
        info.status = fields["status"]
    extra: dict[str, Any] = {}
    for hook in runtime.hooks.on_finish if failed is None else []:
        result = await hook(runtime, updated)
        if result:
            extra.update(result)
    # after the probes and scorers: stop per-run upstream processes, keep sandboxes
    for after in runtime.hooks.after_finish:
        await after(runtime, updated)
    root_events = runtime.hooks.root_events
    events = root_events(updated, extra) if root_events is not None else []
    await runtime.flush()
    info = runtime.runs.cached(run_id)
    client = client_label(info.client) if info is not None else None
    if info is not None and info.adhoc:
        runtime.runs.adhoc_ended(info)  # its session or client opens a new run from now on
    ended = await anyio.to_thread.run_sync(
        lambda: end_run(runtime.store, run_id, client, index=True)  # (its search document too)
    )
    assert ended is not None
    updated, summary = ended
    first = summary.first_ns
    end_ns = time.time_ns()
    if updated.adhoc_key is not None and summary.last_ns is not None:
        end_ns = summary.last_ns  # an ad-hoc root ends at its last child, not at this call
    root = root_span(
        updated, end_ns=end_ns, events=events, resource=runtime.resource, start_ns=first
    )
    emit(runtime.span_sink, root)
    return run_view(runtime, updated, **extra)
