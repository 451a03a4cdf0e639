"""`/api/jobs`: what a cell's job steps ask the server that serves its agent (begin an attempt,
with the run's replay/fault environment loaded here), and the cells and workers of an experiment
(`GET /api/experiments/{id}/cells`, shown on the experiment page)."""

from __future__ import annotations

import logging
from typing import Any

import anyio.to_thread
from litestar import Controller, get, post
from litestar.datastructures import State
from pydantic import BaseModel, ConfigDict, Field

from tracecard.server.api.deps import runtime_of, service_call
from tracecard.server.errors import RunError
from tracecard.server.jobs.attempts import begin_attempt, end_cancelled
from tracecard.server.jobs.cells import experiment_cells
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runs.service import run_view
from tracecard.server.runtime import Runtime
from tracecard.traces import queries
from tracecard.traces.models import RunRow

__all__ = ["JobsController", "load_environment"]

log = logging.getLogger(__name__)


class AttemptBegin(BaseModel):
    """Body of `POST /api/jobs/attempts`."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(max_length=32)
    executor: str = Field(max_length=64)
    host: str | None = Field(default=None, max_length=200)


def load_environment(runtime: Runtime, run: RunRow) -> None:
    """The experiment's replay source and fault plan (`experiments.environment`) for this run,
    on this server: the proxy that serves its agent may not be the one that created it."""
    from tracecard.server.faults.plan import FaultPlan, run_faults
    from tracecard.server.replay.plan import ReplayPlan
    from tracecard.server.replay.source import build_indexes, check_plan

    environment = runtime.hooks.environment
    if environment is None or run.experiment_id is None:
        return
    experiment = queries.get_experiment(runtime.store, run.experiment_id)
    stored = (experiment.environment if experiment else None) or {}
    if experiment is None or not stored:
        return
    if stored.get("replay"):
        plan = ReplayPlan.model_validate(stored["replay"])
        store, settings = runtime.store, runtime.settings
        sources = check_plan(store, settings, plan, experiment.suite_version, experiment.trials)
        environment.add(build_indexes(store, settings, plan, [run], sources))
    if stored.get("faults"):
        faults = FaultPlan.model_validate(stored["faults"])
        environment.add_faults({run.id: run_faults(faults, run.task_id or "", run.trial)})


class JobsController(Controller):
    path = "/api"
    tags = ["jobs"]

    @post("/jobs/attempts", status_code=201, summary="Begin an attempt at a cell's run")
    async def begin(self, state: State, data: AttemptBegin) -> dict[str, Any]:
        runtime = runtime_of(state)

        def begin() -> tuple[Any, dict[str, Any]]:
            begun = begin_attempt(
                runtime.store, runtime.settings, data.run_id, data.executor, data.host
            )
            load_environment(runtime, begun.run)
            return begun, {"attempt": begun.attempt, "lost": begun.lost}

        async def call() -> tuple[Any, dict[str, Any]]:
            return await anyio.to_thread.run_sync(begin)

        begun, extra = await service_call(call())
        runtime.runs.remember(RunInfo.from_row(begun.run))
        instruction = await _instruction(runtime, begun.run)
        return run_view(runtime, begun.run, instruction=instruction, **extra)

    @post(
        "/jobs/attempts/{run_id:str}/cancelled",
        status_code=200,
        summary="A cancelled cell's attempt ended: the run aborted, unscored",
    )
    async def cancelled(self, state: State, run_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        row = await anyio.to_thread.run_sync(end_cancelled, runtime.store, run_id)
        if row is None:
            raise RunError(f"no run with id {run_id!r}", 404)
        info = runtime.runs.cached(run_id)
        if info is not None:
            info.status = row.status
        for after in runtime.hooks.after_finish:  # its per-run processes go; no probes, scores
            await after(runtime, row)
        return run_view(runtime, row)

    @get("/experiments/{experiment_id:str}/cells", summary="Cells by state, attempts, workers")
    async def cells(self, state: State, experiment_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)

        async def call() -> dict[str, Any]:
            return await anyio.to_thread.run_sync(experiment_cells, runtime.store, experiment_id)

        return await service_call(call())


async def _instruction(runtime: Runtime, run: RunRow) -> str:
    """The task's instruction, for the agent's environment."""
    from tracecard.server.evaluation.hooks import tasks_of
    from tracecard.server.evaluation.service import task_of

    # the suite parsed once per version, not per run (200 BFCL tasks: 1.8 MB, 0.17 s to parse)
    task = await anyio.to_thread.run_sync(task_of, runtime.store, run)
    if task is None:
        raise RunError(f"run {run.id} is not a task's run", 422)
    tasks_of(runtime).put(run.id, task)
    return task.instruction
