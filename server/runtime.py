"""The server's resources, opened in one async context manager and closed in reverse order.

Order of shutdown matters: child processes and the HTTP client first, then the tracer provider
is flushed (every recorded span reaches the database), and only then is the engine disposed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import httpx
from httpx_aiohttp import AiohttpTransport
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from tracecard.server.draining import DrainEvent
from tracecard.server.hooks import Hooks
from tracecard.server.recording.span_ids import TimeOrderedIds
from tracecard.server.recording.tool_links import ToolCallLinks
from tracecard.server.run_threads import in_thread
from tracecard.server.runs.registry import RunRegistry
from tracecard.server.settings import Settings
from tracecard.server.shared_flush import SharedFlush
from tracecard.traces import semconv
from tracecard.traces.deadletter import DEAD_LETTER_NAME, DeadLetters
from tracecard.traces.exporter import SqlSpanExporter, StoringBatchProcessor
from tracecard.traces.secrets import database_secret, derive_key
from tracecard.traces.spool import Spool, spool_for
from tracecard.traces.store import Store
from tracecard.traces.urls import is_sqlite

if TYPE_CHECKING:
    from tracecard.server.evaluation.hooks import TaskCache
    from tracecard.server.evaluation.probe_http import ProbeHttp
    from tracecard.server.evaluation.tool_lists import ToolListCache
    from tracecard.server.evaluation.turns import TurnBoard
    from tracecard.server.proxy.state import ProxyState
    from tracecard.server.recording.ingest import Ingest
    from tracecard.server.runs.adhoc import AdhocRuns
    from tracecard.server.stdio.bridge import StdioBridge

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything a request handler may need, built once per app."""

    settings: Settings
    store: Store
    provider: TracerProvider
    processor: StoringBatchProcessor
    tracer: Tracer
    resource: Resource
    http: httpx.AsyncClient
    runs: RunRegistry
    hooks: Hooks = field(default_factory=Hooks)
    # model-requested calls waiting for their tool spans: one for the HTTP proxy's recorder and
    # the stdio bridge's (a model call and a stdio tool call must meet here)
    tool_links: ToolCallLinks = field(default_factory=ToolCallLinks)
    # Each feature's service, set by the app factory while it starts (None: not running).
    proxy: ProxyState | None = None
    stdio: StdioBridge | None = None
    adhoc: AdhocRuns | None = None  # ends ad-hoc runs (idle, DELETE, shutdown)
    otlp_ingest: Ingest | None = None
    tasks: TaskCache | None = None
    turns: TurnBoard | None = None  # multi-turn runs: the turn each is in
    tool_lists: ToolListCache | None = None  # upstreams' tools/list, for suite checks
    probe_http: ProbeHttp | None = None  # outcome probes' connections, closed at shutdown
    # Derived from the database's secret (`tracecard.traces.secrets`), shared by its replicas:
    # the credential of the server's own probe traffic, the key of redaction fingerprints,
    # and the key that signs the viewer forms' CSRF tokens (tracecard.viewer.csrf).
    verifier_key: str = ""
    fingerprint_key: bytes = b""
    csrf_key: bytes = b""
    wrap_key: bytes = b""  # the key of `tracecard wrap`'s per-run credentials
    # Set when the server starts shutting down: endless streams close, calls in flight finish.
    draining: DrainEvent = field(default_factory=DrainEvent)
    _flushes: SharedFlush = field(init=False, repr=False)

    @property
    def span_sink(self) -> Any:
        """Every span processor of the provider (the store, and a collector when configured)."""
        return getattr(self.tracer, "span_processor", self.processor)

    async def flush(self) -> None:
        """Wait until every span recorded so far is committed (callers at the same time share
        the flush: `tracecard.server.shared_flush`)."""
        await self._flushes()

    async def _flush_now(self) -> None:
        await self.runs.drain()
        await in_thread(self.processor.force_flush)

    def __post_init__(self) -> None:
        self._flushes = SharedFlush(self._flush_now)


def make_http_client(settings: Settings) -> httpx.AsyncClient:
    """The upstream client: httpx API over aiohttp's transport (cheaper per call)."""
    transport = AiohttpTransport(
        limits=httpx.Limits(max_connections=512, max_keepalive_connections=512),
        trust_env=False,
    )
    return httpx.AsyncClient(
        transport=transport,
        timeout=httpx.Timeout(settings.upstream_timeout_s, connect=10.0),
        follow_redirects=False,
        trust_env=False,
    )


def make_tracer_provider(
    store: Store, settings: Settings
) -> tuple[TracerProvider, StoringBatchProcessor]:
    resource = Resource.create(
        {"service.name": "tracecard", "telemetry.sdk.name": "opentelemetry"},
        schema_url=semconv.SCHEMA_URL,
    )
    # span ids that grow with time: the stored spans' key is appended to, not scattered into
    provider = TracerProvider(
        resource=resource, shutdown_on_exit=False, id_generator=TimeOrderedIds()
    )
    recording = settings.recording
    spool = None
    if recording.spool:
        fsync = recording.spool_fsync
        spool = Spool(
            spool_for(store.url, recording.spool_dir),
            fsync=not is_sqlite(store.url) if fsync is None else fsync,
        )
    processor = StoringBatchProcessor(
        SqlSpanExporter(store, spool, store_every_s=recording.store_every_ms / 1000),
        max_queue_size=settings.recording.batch_max_queue,
        schedule_delay_millis=settings.recording.batch_delay_ms,
        max_export_batch_size=min(2048, settings.recording.batch_max_queue),
    )
    provider.add_span_processor(processor)
    if settings.recording.otlp_endpoint:
        # fan-out to any OTLP collector (Jaeger, Tempo, Phoenix, another tracecard)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(
            endpoint=settings.recording.otlp_endpoint, headers=settings.recording.otlp_headers
        )
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider, processor


@asynccontextmanager
async def open_runtime(settings: Settings, store: Store | None = None) -> AsyncIterator[Runtime]:
    """Open the store, the tracer provider and the HTTP client; close them in reverse order."""
    async with AsyncExitStack() as stack:
        own_store = store is None
        store = store or Store(settings.db)
        if own_store:
            stack.callback(store.dispose)
        await anyio.to_thread.run_sync(store.create_schema)
        spool_dir = spool_for(store.url, settings.recording.spool_dir).parent
        store.dead_letters = DeadLetters(
            spool_dir / DEAD_LETTER_NAME, settings.recording.dead_letter_max_bytes
        )
        secret = await anyio.to_thread.run_sync(database_secret, store)
        provider, processor = make_tracer_provider(store, settings)
        stack.callback(provider.shutdown)  # flushes the batch processor: every span is stored
        http = make_http_client(settings)
        stack.push_async_callback(http.aclose)
        runtime = Runtime(
            settings=settings,
            store=store,
            provider=provider,
            processor=processor,
            tracer=provider.get_tracer("tracecard", schema_url=semconv.SCHEMA_URL),
            resource=provider.resource,
            http=http,
            runs=RunRegistry(store),
            verifier_key=derive_key(secret, "verifier").hex(),
            fingerprint_key=derive_key(secret, "fingerprint"),
            csrf_key=derive_key(secret, "viewer csrf"),
            wrap_key=derive_key(secret, "wrap"),
        )
        stack.push_async_callback(runtime.runs.drain)
        yield runtime
