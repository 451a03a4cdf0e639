"""`/api/runs`: create, finish, read runs and their spans."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from litestar import Controller, Response, get, post
from litestar.datastructures import State

from tracecard.server.api.deps import runtime_of, service_call
from tracecard.server.runs.service import (
    RunCreate,
    RunFinish,
    create_run,
    finish_run,
    get_run,
    run_view,
)
from tracecard.traces.otlp import encode_otlp_json


class RunController(Controller):
    path = "/api/runs"
    tags = ["runs"]

    @post("/", status_code=201, summary="Create a run and get its proxy URLs")
    async def create(self, state: State, data: RunCreate) -> dict[str, Any]:
        runtime = runtime_of(state)
        row = await service_call(create_run(runtime, data))
        return run_view(runtime, row)

    @get("/{run_id:str}", summary="A run: status, final answer, scores, URLs")
    async def read(self, state: State, run_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        row = await service_call(get_run(runtime, run_id))
        reader = runtime.hooks.run_scores
        extra = await reader(runtime, row) if reader else {}
        return run_view(runtime, row, **extra)

    @post("/{run_id:str}/finish", status_code=200, summary="End a run; probes and scorers run")
    async def finish(
        self, state: State, run_id: str, data: RunFinish | None = None
    ) -> dict[str, Any]:
        runtime = runtime_of(state)
        return await service_call(finish_run(runtime, run_id, data or RunFinish()))

    @get("/{run_id:str}/spans", summary="The run's spans in start-time order")
    async def spans(self, state: State, run_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        await service_call(get_run(runtime, run_id))
        await runtime.flush()
        spans = await anyio.to_thread.run_sync(runtime.store.spans_for_run, run_id)
        return {"spans": spans}

    @get("/{run_id:str}/trace.otlp.json", summary="The run's trace as OTLP JSON")
    async def otlp(self, state: State, run_id: str) -> Response[bytes]:
        runtime = runtime_of(state)
        await service_call(get_run(runtime, run_id))
        await runtime.flush()
        spans = await anyio.to_thread.run_sync(runtime.store.spans_for_run, run_id)
        return Response(
            encode_otlp_json(spans),
            media_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="run-{run_id}.otlp.json"'},
        )
