"""What the viewer needs of the server's runtime, typed loosely so that the viewer never imports
`server` (imports point down only: server -> viewer -> scorers -> traces)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import anyio.to_thread
from litestar.datastructures import State

from tracecard.traces.store import Store

T = TypeVar("T")


class ViewerRuntime(Protocol):
    """The slice of `tracecard.server.runtime.Runtime` the pages read."""

    store: Store
    settings: Any
    csrf_key: bytes  # signs the forms' CSRF tokens (tracecard.viewer.csrf)

    async def flush(self) -> None:
        """Wait until every span recorded so far is committed."""


def runtime_of(state: State) -> ViewerRuntime:
    """The runtime the app's lifespan put on `state`."""
    runtime: ViewerRuntime = state.runtime
    return runtime


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """Run blocking store work (and the rendering that follows it) off the event loop."""
    return await anyio.to_thread.run_sync(function, *args)
