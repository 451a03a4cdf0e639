"""The app factory: the only place that wires controllers, templates, plugins and lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio.to_thread
from litestar import Litestar, Request, Response, get
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ControllerRouterHandler

from tracecard import __version__
from tracecard.server.api.environment import RobustnessController
from tracecard.server.api.runs import RunController
from tracecard.server.evaluation.feature import HANDLERS as EVALUATION_HANDLERS
from tracecard.server.evaluation.feature import evaluation_lifespan
from tracecard.server.evaluation.feature import install as install_evaluation
from tracecard.server.jobs.api import JobsController
from tracecard.server.jobs.backoff import install_backoff
from tracecard.server.jobs.engine import queue_health
from tracecard.server.mrtr import install_mrtr, mrtr_lifespan
from tracecard.server.proxy import ProxyRouter, proxy_lifespan
from tracecard.server.recording.ingest import ingest_traces, issue_wrap_credential
from tracecard.server.recording.ingest import install as install_otlp_ingest
from tracecard.server.replay import install as install_replay
from tracecard.server.replay import replay_lifespan
from tracecard.server.runs.adhoc import adhoc_lifespan
from tracecard.server.runtime import Runtime, open_runtime
from tracecard.server.security import SecurityGuard
from tracecard.server.settings import Settings
from tracecard.server.stdio import stdio_lifespan
from tracecard.traces.store import Store
from tracecard.viewer import SchemaPage, schema_router, viewer_router
from tracecard.viewer.csrf import FormTokens


@get("/healthz", tags=["health"], summary="Liveness and readiness")
async def healthz(state: State) -> dict[str, Any]:
    """`status` is `degraded` once any span could not be stored at all (`recording.dropped`,
    `lost`, or `queue_dropped` by the full span queue);
    `recording` also counts spans stored in readable form, retries and what the spool holds."""
    runtime: Runtime = state.runtime
    recording = {**runtime.store.health.as_dict(), **runtime.processor.exporter.stats.as_dict()}
    recording["queue_dropped"] = runtime.processor.queue_dropped  # the SDK's full span queue
    spool = runtime.processor.exporter.spool  # how durable a logged batch is (None: no spool)
    recording["spool_fsync"] = None if spool is None else spool.fsync
    dead_letters = runtime.store.dead_letters
    if dead_letters is not None:  # where dropped rows went (`dead_lettered` of `dropped`)
        recording["dead_letter_file"] = str(dead_letters.path)
        recording["dead_letter_full"] = dead_letters.full
    dropped = recording["dropped"] + recording["lost"] + recording["queue_dropped"]
    health = {
        "status": "degraded" if dropped else "ok",
        "upstreams": sorted(runtime.settings.upstreams),
        "recording": recording,
    }
    jobs = await anyio.to_thread.run_sync(queue_health)  # a worker's queue depth (server/jobs)
    if jobs is not None:
        health["jobs"] = jobs
    return health


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


def create_app(settings: Settings, store: Store | None = None) -> Litestar:
    """Build the app for `settings`; tests pass their own settings (and may share a store).

    Every feature is wired here, in the order it starts: evaluation and OTLP ingest install their
    hooks, then the probes' connection pool, the proxy's client and the stdio bridge open (and
    close in reverse order).
    """

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_runtime(settings, store) as runtime, AsyncExitStack() as stack:
            app.state.runtime = runtime
            install_evaluation(runtime)
            install_otlp_ingest(runtime)
            install_replay(runtime)  # after evaluation: its finish report follows the probes
            install_mrtr(runtime)  # before the recorders; its finish hook runs first
            install_backoff(runtime)  # a 429 from a [limits.model] upstream holds its key
            await stack.enter_async_context(evaluation_lifespan(runtime))
            await stack.enter_async_context(mrtr_lifespan(runtime))  # closes after the proxy
            await stack.enter_async_context(replay_lifespan(runtime))  # open runs' indexes
            await stack.enter_async_context(proxy_lifespan(runtime))
            await stack.enter_async_context(stdio_lifespan(runtime))
            # last in, first out: live ad-hoc runs end (reason `shutdown`) before the bridge,
            # the proxy and the span processor close
            await stack.enter_async_context(adhoc_lifespan(runtime))
            yield

    handlers: list[ControllerRouterHandler] = [
        healthz,
        RunController,
        *EVALUATION_HANDLERS,
        RobustnessController,
        JobsController,  # durable jobs: attempts at cells, cells by state (server/jobs)
        ingest_traces,
        issue_wrap_credential,
        viewer_router(),
    ]
    app = Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        openapi_config=OpenAPIConfig(
            title="tracecard",
            version=__version__,
            path="/schema",
            render_plugins=[SchemaPage()],  # Swagger UI from this origin, not a CDN
            openapi_router=schema_router("/schema"),
        ),
        exception_handlers={Exception: _error_handler},
        request_max_body_size=settings.max_body_bytes,
        debug=False,
    )
    app.state.settings = settings
    return app


def asgi_app(settings: Settings, store: Store | None = None) -> Any:
    """The app as served: the proxy's prefix router in front of Litestar (no framework work per
    proxied call), all of it behind the security guard (Host, Origin, token, content type)."""
    app = create_app(settings, store)
    forms = FormTokens(key=lambda: app.state.runtime.csrf_key)
    return SecurityGuard(ProxyRouter(app), settings, forms)
