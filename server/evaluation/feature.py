"""The evaluation feature: suites, experiments, scoring hooks and their API routes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from litestar.types import ControllerRouterHandler

from tracecard.server.api.evaluation import (
    CompareController,
    ExperimentController,
    RunEvaluationController,
    SuiteController,
)
from tracecard.server.evaluation.hooks import (
    make_argument_checker,
    make_enforcer,
    probe_and_score,
    resolve_run_create,
    root_events,
    task_fixture,
    task_params,
)
from tracecard.server.evaluation.probe_http import ProbeHttp
from tracecard.server.evaluation.tool_lists import ToolListCache
from tracecard.server.evaluation.turns import close_turns
from tracecard.server.runtime import Runtime
from tracecard.traces.models import RunRow


async def _run_scores(runtime: Runtime, run: RunRow) -> dict[str, Any]:
    """`GET /api/runs/{id}` shows the run's stored scores."""
    rows = (await anyio.to_thread.run_sync(runtime.store.scores_for_runs, [run.id]))[run.id]
    return {
        "scores": [
            {
                "component": r.component,
                "value": r.value,
                "passed": r.passed,
                "evidence": r.evidence,
                "scorer": r.scorer,
                "version": r.scorer_version,
            }
            for r in rows
        ]
    }


def install(runtime: Runtime) -> None:
    """Suites and experiments: run creation from a task, probes and scorers at finish."""
    runtime.hooks.resolve_run_create = resolve_run_create
    runtime.hooks.on_finish.append(close_turns)  # the last turn's probes, before scoring
    runtime.hooks.on_finish.append(probe_and_score)
    runtime.hooks.root_events = root_events
    runtime.hooks.run_scores = _run_scores
    runtime.hooks.enforce = make_enforcer(runtime)
    runtime.hooks.argument_checks = make_argument_checker(runtime)
    runtime.hooks.task_params = task_params
    runtime.hooks.task_fixture = task_fixture
    runtime.tool_lists = ToolListCache(runtime.settings.tool_list_ttl_s)


@asynccontextmanager
async def evaluation_lifespan(runtime: Runtime) -> AsyncIterator[None]:
    """The probes' connection pool, for the app's lifetime (opened on the first probe); closed
    on shutdown, after the proxy and the stdio bridge (entered before them)."""
    probe_http = runtime.probe_http = ProbeHttp()
    try:
        yield
    finally:
        await probe_http.aclose()


HANDLERS: Sequence[ControllerRouterHandler] = (
    SuiteController,
    ExperimentController,
    CompareController,
    RunEvaluationController,
)
