"""`POST /v1/traces`: OTLP/HTTP ingest of the agent's own spans (LLM calls, agent steps).

A request is answered only after its spans are committed. Each span joins a run by, in order:
the `tracecard.run.id` (or baggage-copied `tracecard.run`) attribute on the span or its resource,
the request's `Tracecard-Run` or `baggage: tracecard.run=<id>` header, or its trace id (the
trace of a known run, or a trace the proxy has recorded a call in). Anything else is attached to
an ad-hoc run per trace id: stored, never dropped. A span that looks like tracecard's own
recording of a call counts as evidence only with `tracecard wrap`'s MAC for the run it joined
(`wrap_credential`); otherwise it is marked `tracecard.evidence = agent_reported`. A span of a
named run that came in another trace is moved into the run's trace (`into_run_traces`).
"""

from __future__ import annotations

import logging
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import anyio.to_thread
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.exceptions import NotFoundException
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import SpanProcessor

from tracecard.server.asgi import BAGGAGE_RUN_KEY, header_run
from tracecard.server.recording.ingested import distrust, redact, take_macs
from tracecard.server.recording.redaction import Redactor
from tracecard.server.recording.wrap_credential import WRAP_MAC, credential
from tracecard.server.runtime import Runtime
from tracecard.traces import queries, semconv
from tracecard.traces.otlp_ingest import (
    JSON,
    PROTOBUF,
    DecodedBatch,
    OtlpDecodeError,
    OtlpTooManySpans,
    decode,
    encode_response,
    encode_status,
)
from tracecard.traces.store import SpanDict, Store
from tracecard.traces.writes import DatabaseBusy

log = logging.getLogger(__name__)

ADHOC_PREFIX = "otlp:"
INSERT_CHUNK = 2000
CONCURRENT_DECODES = 2
_RUN_ATTRIBUTES = (semconv.RUN_ID, BAGGAGE_RUN_KEY)


class TraceRunIndex(SpanProcessor):
    """Trace id -> run id for every span the proxy starts, so agent spans of that trace join."""

    def __init__(self, capacity: int = 50000) -> None:
        self._runs: OrderedDict[str, str] = OrderedDict()
        self._capacity = capacity
        # (trace id, run id) of the newest entry: a run's next span of the same trace changes
        # nothing, and is not formatted and looked up again
        self._newest: tuple[int, str] | None = None

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        attributes = span.attributes or {}
        run_id = attributes.get(semconv.RUN_ID)
        if isinstance(run_id, str):
            trace_id = span.get_span_context().trace_id
            if self._newest != (trace_id, run_id):
                self.remember(format(trace_id, "032x"), run_id)
                self._newest = (trace_id, run_id)
            agent_trace = attributes.get(semconv.AGENT_TRACE_ID)
            if isinstance(agent_trace, str):  # the agent's own trace, moved into the run's
                self.remember(agent_trace, run_id)

    def remember(self, trace_id: str, run_id: str) -> None:
        self._newest = None
        self._runs[trace_id] = run_id
        self._runs.move_to_end(trace_id)
        if len(self._runs) > self._capacity:
            self._runs.popitem(last=False)

    def get(self, trace_id: str) -> str | None:
        return self._runs.get(trace_id)


def _named_run(span: SpanDict) -> str | None:
    for attributes in (span["attributes"], span["resource"]):
        for key in _RUN_ATTRIBUTES:
            value = attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _run_of_trace_in_db(store: Store, trace_id: str) -> str | None:
    found = queries.run_id_of_trace(store, trace_id)
    if found is not None:
        return found
    adhoc = store.adhoc_run(ADHOC_PREFIX + trace_id)
    return adhoc.id if adhoc is not None else None


class Ingest:
    """Joins decoded spans to runs and commits them."""

    def __init__(self, runtime: Runtime, index: TraceRunIndex) -> None:
        self.runtime = runtime
        self.index = index
        # decoded requests held in memory at once: the rest wait with only their bytes read
        self.limiter = anyio.CapacityLimiter(CONCURRENT_DECODES)
        self.redactor = Redactor(runtime.settings.recording, runtime.fingerprint_key)
        self._known: OrderedDict[str, bool] = OrderedDict()

    async def _exists(self, run_id: str) -> bool:
        if run_id in self._known:
            return True
        if await self.runtime.runs.resolve(run_id) is None:
            return False
        self._known[run_id] = True
        if len(self._known) > 20000:
            self._known.popitem(last=False)
        return True

    async def _run_for_trace(self, trace_id: str) -> str:
        run_id = self.index.get(trace_id)
        if run_id is None:
            run_id = await anyio.to_thread.run_sync(
                _run_of_trace_in_db, self.runtime.store, trace_id
            )
        if run_id is None:
            run_id = self.runtime.runs.adhoc(ADHOC_PREFIX + trace_id, config_name="otlp").id
        self.index.remember(trace_id, run_id)
        return run_id

    async def join(self, spans: list[SpanDict], headers: Mapping[str, str]) -> None:
        """Set `run_id` on every span (see the module docstring for the order)."""
        request_run: str | None = header_run(headers)
        if request_run is not None and not await self._exists(request_run):
            request_run = None
        by_trace: dict[str, str] = {}
        known: dict[str, bool] = {}  # one lookup per run named in the request, not per span
        for span in spans:
            named = _named_run(span)
            exists: bool | None = False
            if named is not None:
                exists = known.get(named)
                if exists is None:
                    exists = known[named] = await self._exists(named)
            if named is not None and exists:
                span["run_id"] = named
                by_trace.setdefault(span["trace_id"], named)
            elif request_run is not None:
                span["run_id"] = request_run
                by_trace.setdefault(span["trace_id"], request_run)
        for trace_id, joined in by_trace.items():
            self.index.remember(trace_id, joined)
        for span in spans:
            if span.get("run_id") is None:
                found = by_trace.get(span["trace_id"])
                if found is None:
                    found = await self._run_for_trace(span["trace_id"])
                    by_trace[span["trace_id"]] = found
                span["run_id"] = found
        await self.runtime.runs.drain()  # ad-hoc run rows are committed before the answer

    async def into_run_traces(self, spans: list[SpanDict]) -> None:
        """One run, one trace: a span of a named run in another trace (the agent's
        instrumentation started its own) moves into the run's trace, its trace id kept as
        `tracecard.agent.trace_id`; a root of that trace hangs under the run's root span.
        Ad-hoc runs keep the trace they came with."""
        runs: dict[str, tuple[str, str] | None] = {}
        for span in spans:
            run_id = str(span["run_id"])
            if run_id not in runs:
                info = await self.runtime.runs.resolve(run_id)
                usable = info is not None and not info.adhoc
                runs[run_id] = (info.trace_id, info.root_span_id) if usable and info else None
            target = runs[run_id]
            if target is None or span["trace_id"] == target[0]:
                continue
            span["attributes"][semconv.AGENT_TRACE_ID] = span["trace_id"]
            span["trace_id"] = target[0]
            if not span.get("parent_span_id"):
                span["parent_span_id"] = target[1]

    async def commit(self, batch: DecodedBatch, headers: Mapping[str, str]) -> None:
        """Join and store every span; in chunks, so that a large request never has all its
        rows encoded at once (a retried request is harmless: inserts are idempotent)."""
        macs = take_macs(batch.spans)
        redact(batch.spans, self.redactor)
        await self.join(batch.spans, headers)
        distrust(batch.spans, macs, self.runtime.wrap_key)
        await self.into_run_traces(batch.spans)
        for start in range(0, len(batch.spans), INSERT_CHUNK):
            chunk = batch.spans[start : start + INSERT_CHUNK]
            await anyio.to_thread.run_sync(self.runtime.store.insert_spans, chunk)


def _media(content_type: str) -> str:
    media = content_type.split(";", 1)[0].strip().lower()
    return JSON if media == JSON else PROTOBUF


async def _read_body(request: Request[Any, Any, Any], limit: int) -> bytes | None:
    """The (decompressed) body, or None when it exceeds `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    inflater = zlib.decompressobj(wbits=31) if encoding == "gzip" else None
    if encoding not in ("gzip", "identity", ""):
        raise OtlpDecodeError(f"unsupported content-encoding {encoding!r}: send gzip or none")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        if inflater is not None:
            try:
                chunk = inflater.decompress(chunk, limit + 1 - size)
            except zlib.error as exc:
                raise OtlpDecodeError(f"body is not valid gzip: {exc}") from exc
            if inflater.unconsumed_tail:
                return None
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    if inflater is not None and not inflater.eof:
        raise OtlpDecodeError("body is not valid gzip: truncated stream")
    return b"".join(chunks)


def _error(media: str, status: int, code: int, message: str) -> Response[bytes]:
    return Response(encode_status(media, code, message), status_code=status, media_type=media)


@post(
    "/v1/traces",
    tags=["otlp"],
    summary="OTLP/HTTP trace ingest (protobuf or JSON, gzip accepted)",
    request_max_body_size=None,
    status_code=200,
)
async def ingest_traces(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    """Decode, join to runs, commit, then answer `ExportTraceServiceResponse`."""
    runtime: Runtime = state.runtime
    ingest = runtime.otlp_ingest
    assert ingest is not None, "the OTLP ingest service starts with the app"
    content_type = request.headers.get("content-type", "")
    media = _media(content_type)
    limit = runtime.settings.max_body_bytes
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        body = await _read_body(request, limit)
        if body is None:
            return _error(
                media,
                413,
                8,
                f"body over the size limit of {limit} bytes: send smaller batches or raise "
                "`max_body_bytes` (TRACECARD_MAX_BODY_BYTES)",
            )
        async with ingest.limiter:
            batch = await anyio.to_thread.run_sync(
                decode, body, content_type, runtime.settings.otlp_max_spans
            )
            del body
            await ingest.commit(batch, headers)
    except OtlpTooManySpans as exc:
        return _error(media, 413, 8, str(exc))
    except OtlpDecodeError as exc:
        status = 415 if str(exc).startswith("unsupported content type") else 400
        return _error(media, status, 3, str(exc))
    except DatabaseBusy as exc:  # nothing stored for sure: the client retries (OTLP: 503)
        response = _error(media, 503, 14, f"the database is busy, retry later: {exc}")
        response.headers["retry-after"] = "5"
        return response
    if batch.rejected:
        log.warning("OTLP ingest rejected %d spans: %s", batch.rejected, batch.error_message)
    return Response(
        encode_response(media, batch.rejected, batch.error_message),
        status_code=200,
        media_type=media,
    )


@post(
    "/api/runs/{run_id:str}/wrap-credential",
    tags=["runs"],
    summary="The run's credential for `tracecard wrap` (it signs the spans it ships)",
    status_code=200,
)
async def issue_wrap_credential(run_id: str, state: State) -> dict[str, str]:
    """`{run_id, credential, attribute}` for a known run; 404 otherwise."""
    runtime: Runtime = state.runtime
    if await runtime.runs.resolve(run_id) is None:
        raise NotFoundException(f"no run {run_id!r}: create it first (POST /api/runs)")
    return {
        "run_id": run_id,
        "credential": credential(runtime.wrap_key, run_id),
        "attribute": WRAP_MAC,
    }


def install(runtime: Runtime) -> None:
    """Index the proxy's spans by trace id and make the ingest service available."""
    index = TraceRunIndex()
    runtime.provider.add_span_processor(index)
    runtime.otlp_ingest = Ingest(runtime, index)
