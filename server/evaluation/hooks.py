"""The evaluation hooks a run goes through: task lookup at creation, enforce mode on the proxy's
hot path (memory only), probes and scorers when the run finishes, evaluation events on its root."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import orjson
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event

from tracecard.scorers import ComponentScore, RunFacts, Task, check_call, score_run
from tracecard.scorers.safety import record_time_checks
from tracecard.scorers.verdict import scores_verdict
from tracecard.server.evaluation.probe_http import ProbeHttp
from tracecard.server.evaluation.probes import ProbeContext, run_probes
from tracecard.server.evaluation.service import evaluation_events, new_task_run, score_rows, task_of
from tracecard.server.hooks import ArgumentChecks, Enforcer
from tracecard.server.recording.recorder import VERIFIER_HEADER
from tracecard.server.recording.redaction import Redactor
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runs.service import RunCreate
from tracecard.server.runtime import Runtime
from tracecard.traces.models import RunRow
from tracecard.traces.secrets import fingerprint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlockDecision:
    """Why the proxy refused a call (enforce mode)."""

    rule_id: str
    message: str


class TaskCache:
    """Tasks by run id, so that enforce mode never reads the database on the hot path."""

    def __init__(self) -> None:
        self._by_run: dict[str, Task] = {}

    def put(self, run_id: str, task: Task | None) -> None:
        if task is not None:
            self._by_run[run_id] = task

    def get(self, run_id: str) -> Task | None:
        return self._by_run.get(run_id)

    def drop(self, run_id: str) -> None:
        self._by_run.pop(run_id, None)


def tasks_of(runtime: Runtime) -> TaskCache:
    if runtime.tasks is None:
        runtime.tasks = TaskCache()
    return runtime.tasks


async def resolve_run_create(runtime: Runtime, body: RunCreate) -> RunRow:
    """`POST /api/runs` with a suite, task or experiment: checked, and its task cached."""
    row = await anyio.to_thread.run_sync(
        lambda: new_task_run(
            runtime.store,
            runtime.settings,
            suite_ref=body.suite,
            task_id=body.task_id,
            experiment_id=body.experiment_id,
            config=body.config,
            trial=body.trial,
        )
    )
    tasks_of(runtime).put(row.id, await anyio.to_thread.run_sync(task_of, runtime.store, row))
    return row


async def _task_of_run(runtime: Runtime, run_id: str) -> Task | None:
    task = tasks_of(runtime).get(run_id)
    if task is None:
        run = await anyio.to_thread.run_sync(runtime.store.get_run, run_id)
        task = await anyio.to_thread.run_sync(task_of, runtime.store, run) if run else None
    return task


async def task_params(runtime: Runtime, run_id: str) -> dict[str, str]:
    """The params of a run's task, for a per-run upstream's `{task.NAME}`."""
    task = await _task_of_run(runtime, run_id)
    return dict(task.params) if task is not None else {}


async def task_fixture(runtime: Runtime, run_id: str) -> str | None:
    """The `fixture` of a run's task, copied into the run's sandbox over the upstream's."""
    task = await _task_of_run(runtime, run_id)
    return task.fixture if task is not None else None


def make_enforcer(runtime: Runtime) -> Enforcer:
    """The proxy's enforce hook: block a call that matches a rule marked `block = true`."""
    cache = tasks_of(runtime)

    def enforce(
        run: RunInfo,
        upstream: str,
        tool: str,
        arguments: dict[str, Any] | None,
        annotations: dict[str, Any] | None,
    ) -> BlockDecision | None:
        task = cache.get(run.id)
        if task is None:
            return None
        violations = check_call(
            task.safety,
            tool,
            arguments,
            annotations,
            allowed_tools=task.tools,
            sandbox=run.sandbox,
        )
        for violation in violations:
            if violation.block:
                return BlockDecision(
                    violation.rule,
                    f"blocked by tracecard safety rule {violation.rule!r}: {violation.reason}",
                )
        return None

    return enforce


def make_argument_checker(runtime: Runtime) -> ArgumentChecks:
    """The recorder's hook: the run's task's argument-pattern rules on the arguments as sent,
    for a call whose stored arguments are redacted (`tracecard.safety.checked`)."""
    cache = tasks_of(runtime)

    def check(run: RunInfo, tool: str, arguments: dict[str, Any] | None) -> str | None:
        task = cache.get(run.id)
        if task is None or not isinstance(arguments, dict):
            return None
        found = record_time_checks(task.safety, tool, arguments)
        return orjson.dumps(found).decode() if found is not None else None

    return check


async def call_tool_through_proxy(
    runtime: Runtime, run_id: str, upstream: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """A probe's tool call: through tracecard's own proxy, so per-run upstreams are reached.

    It presents the database's verifier key (`Tracecard-Verifier`, never forwarded upstream),
    which no agent has: only this traffic is recorded with `tracecard.role = verifier`. The
    connections are the server's one probe pool (server/evaluation/probe_http.py)."""
    from mcp.client.client import Client  # loaded at the first probe, not at every start
    from mcp.client.streamable_http import streamable_http_client

    url = f"{runtime.settings.base_url}/runs/{run_id}/mcp/{upstream}"
    headers = {VERIFIER_HEADER: runtime.verifier_key}
    if runtime.settings.api_token:
        headers["Tracecard-Token"] = runtime.settings.api_token
    if runtime.probe_http is None:  # an app without the evaluation lifespan (unit tests)
        runtime.probe_http = ProbeHttp()
    async with runtime.probe_http.client(headers, runtime.settings.upstream_timeout_s) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool(tool, arguments)
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def probe_context(
    runtime: Runtime, run: RunRow, parent: Context | None, turn: int | None = None
) -> ProbeContext:
    """What the probes of `run` may touch; `turn` marks the probes of one turn's boundary."""
    return ProbeContext(
        call_tool=lambda upstream, tool, args: call_tool_through_proxy(
            runtime, run.id, upstream, tool, args
        ),
        http=runtime.http,
        sandbox=Path(run.sandbox) if run.sandbox else None,
        tracer=runtime.tracer,
        run_id=run.id,
        parent=parent,
        timeout_s=runtime.settings.upstream_timeout_s,
        turn=turn,
        redactor_for=lambda upstream: probe_redactor(runtime, upstream),
    )


def probe_redactor(runtime: Runtime, upstream: str | None) -> Redactor:
    """The recorder's redaction rules for a probe's observations (`redact = false` honoured)."""
    plain = upstream is not None and not getattr(
        runtime.settings.upstreams.get(upstream), "redact", True
    )
    redactor = Redactor(runtime.settings.recording, runtime.fingerprint_key)
    return redactor.plain() if plain else redactor


async def probe_and_score(runtime: Runtime, run: RunRow) -> dict[str, Any] | None:
    """Finish hook: run the task's probes (recorded as verifier spans), then score the run."""
    task = tasks_of(runtime).get(run.id) or await anyio.to_thread.run_sync(
        task_of, runtime.store, run
    )
    if task is None:
        return None
    if task.outcome is not None and task.outcome.probes:
        info = await runtime.runs.resolve(run.id)
        await run_probes(task, probe_context(runtime, run, info.context if info else None))
    await runtime.flush()
    fresh = await anyio.to_thread.run_sync(runtime.store.get_run, run.id)
    assert fresh is not None
    spans = await anyio.to_thread.run_sync(runtime.store.spans_for_run, run.id)
    facts = RunFacts(
        status=fresh.status,  # type: ignore[arg-type]
        final_answer=fresh.final_answer,
        sandbox=fresh.sandbox,
        fingerprint=functools.partial(fingerprint, runtime.fingerprint_key),
    )
    scores = score_run(task, spans, facts)
    await anyio.to_thread.run_sync(
        lambda: runtime.store.replace_scores(
            {run.id: score_rows(fresh, scores)},
            {run.id: scores.flags},
            {},
            {run.id: scores_verdict(scores.components).word},
        )
    )
    tasks_of(runtime).drop(run.id)
    return {"scores": [c.model_dump(mode="json") for c in scores.components], "flags": scores.flags}


def root_events(run: RunRow, extra: dict[str, Any]) -> list[Event]:
    """Scores of a finished run as `gen_ai.evaluation.result` events on its root span."""
    components = [ComponentScore.model_validate(c) for c in extra.get("scores") or []]
    events = evaluation_events(components)
    return [
        Event(e["name"], attributes=e["attributes"], timestamp=e["time_unix_nano"]) for e in events
    ]
