"""The app factory: the only place that wires controllers, templates, plugins and lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, Response, get
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ControllerRouterHandler

from tracecard import __version__
from tracecard.server.api.runs import RunController
from tracecard.server.runtime import Runtime, open_runtime
from tracecard.server.security import token_guard
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

# Features add their handlers and runtime set-up here (proxy, suites, viewer, stdio, OTLP).
Feature = tuple[Sequence[ControllerRouterHandler], Callable[[Runtime], Any] | None]


@get("/healthz", tags=["health"], summary="Liveness and readiness")
async def healthz(state: State) -> dict[str, Any]:
    runtime: Runtime = state.runtime
    return {"status": "ok", "upstreams": sorted(runtime.settings.upstreams)}


def _error_handler(_request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Every error is JSON with a message a person can act on."""
    if isinstance(exc, HTTPException):
        content: dict[str, Any] = {"status_code": exc.status_code, "detail": exc.detail}
        if exc.extra:
            content["extra"] = exc.extra
        return Response(content, status_code=exc.status_code, headers=exc.headers)
    return Response(
        {"status_code": 500, "detail": f"internal error: {type(exc).__name__}: {exc}"},
        status_code=HTTP_500_INTERNAL_SERVER_ERROR,
    )


def _features() -> list[Feature]:
    """Each feature module exposes `feature() -> (handlers, setup)`; imported lazily here."""
    import importlib

    found: list[Feature] = []
    for module_name in (
        "tracecard.server.proxy",
        "tracecard.server.evaluation.feature",
        "tracecard.server.stdio",
        "tracecard.server.recording.ingest",
        "viewer",
    ):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        feature = getattr(module, "feature", None)
        if feature is not None:
            found.append(feature())
    return found


def create_app(settings: Settings, store: Store | None = None) -> Litestar:
    """Build the app for `settings`; tests pass their own settings (and may share a store)."""
    features = _features()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_runtime(settings, store) as runtime:
            app.state.runtime = runtime
            cleanups = []
            for _handlers, setup in features:
                if setup is not None:
                    result = setup(runtime)
                    if hasattr(result, "__aenter__"):
                        cleanups.append(result)
                        await result.__aenter__()
            try:
                yield
            finally:
                for cm in reversed(cleanups):
                    await cm.__aexit__(None, None, None)

    handlers: list[ControllerRouterHandler] = [healthz, RunController]
    for feature_handlers, _setup in features:
        handlers.extend(feature_handlers)
    app = Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        openapi_config=OpenAPIConfig(title="tracecard", version=__version__, path="/schema"),
        exception_handlers={Exception: _error_handler},
        request_max_body_size=settings.max_body_bytes,
        debug=False,
    )
    app.state.settings = settings
    return app


def asgi_app(settings: Settings, store: Store | None = None) -> Any:
    """The app as served: the proxy's prefix router in front of Litestar (no framework work per
    proxied call), all of it behind the API-token guard when a token is configured."""
    from tracecard.server.proxy import ProxyRouter

    app = create_app(settings, store)
    return token_guard(ProxyRouter(app), settings.api_token)
