"""Shared handler helpers: the runtime from app state, service errors as HTTP errors."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from litestar.datastructures import State
from litestar.exceptions import HTTPException

from tracecard.server.runs.service import RunError
from tracecard.server.runtime import Runtime

T = TypeVar("T")


def runtime_of(state: State) -> Runtime:
    runtime: Runtime = state.runtime
    return runtime


async def service_call(awaitable: Awaitable[T]) -> T:
    """Await a service call, turning its domain errors into HTTP errors with the same message."""
    try:
        return await awaitable
    except RunError as exc:
        raise HTTPException(status_code=exc.status_code, detail=str(exc)) from exc
