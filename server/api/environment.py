"""Robustness of an experiment under its fault plan (docs/replay.md, "Fault plans")."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from litestar import Controller, get
from litestar.datastructures import State
from litestar.exceptions import HTTPException

from tracecard.server.api.deps import runtime_of
from tracecard.server.faults.robustness import robustness
from tracecard.server.runs.service import RunError


class RobustnessController(Controller):
    path = "/api/robustness"
    tags = ["experiments"]

    @get("/", summary="Per fault kind and task: how often the agent recovered")
    async def read(self, state: State, experiment: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        await runtime.flush()
        try:
            found: dict[str, Any] = await anyio.to_thread.run_sync(
                robustness, runtime.store, experiment
            )
        except RunError as exc:
            raise HTTPException(status_code=exc.status_code, detail=str(exc)) from exc
        return found
