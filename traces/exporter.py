"""The SQL span exporter: the OpenTelemetry SDK's `BatchSpanProcessor` feeds it batches.

`export()` runs on the processor's worker thread: one batch, one transaction, no event loop.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from tracecard.traces.spool import Spool
from tracecard.traces.store import SpanDict, Store
from tracecard.traces.writes import DatabaseBusy

log = logging.getLogger(__name__)

# OTLP numbering of span kinds and status codes, which is what is stored.
STORED_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
STORED_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def _plain_attributes(attributes: Any) -> dict[str, Any]:
    """Attributes as a plain dict; tuples (the SDK's arrays) become lists, for JSON."""
    if not attributes:
        return {}
    found = dict(attributes)
    for key, value in found.items():
        if isinstance(value, tuple):
            found[key] = list(value)
    return found


_RESOURCES: dict[int, tuple[Resource, dict[str, Any]]] = {}  # one or two per process


def _resource_dict(resource: Resource) -> dict[str, Any]:
    """The resource's attributes, converted once per resource (every span shares one)."""
    cached = _RESOURCES.get(id(resource))
    if cached is not None and cached[0] is resource:
        return cached[1]
    if len(_RESOURCES) > 16:
        _RESOURCES.clear()
    converted = _plain_attributes(resource.attributes)
    _RESOURCES[id(resource)] = (resource, converted)
    return converted


def readable_to_dict(span: ReadableSpan) -> SpanDict:
    """An SDK span as a span dict in the JSON API shape."""
    context = span.get_span_context()
    assert context is not None
    parent = span.parent
    attributes = _plain_attributes(span.attributes)
    events = [
        {
            "name": e.name,
            "time_unix_nano": e.timestamp,
            "attributes": _plain_attributes(e.attributes),
        }
        for e in span.events
    ]
    resource = _resource_dict(span.resource)
    scope = span.instrumentation_scope.name if span.instrumentation_scope else None
    found: SpanDict = {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "kind": STORED_KIND.get(span.kind, 0),
        "start_time_unix_nano": span.start_time or 0,
        "end_time_unix_nano": span.end_time,
        "status": {
            "code": STORED_STATUS[span.status.status_code],
            "message": span.status.description,
        },
        "attributes": attributes,
        "events": events,
        "resource": resource,
        "scope": scope,
    }
    if span.links:  # most spans have none: the key is left out, stored as []
        found["links"] = [
            {
                "trace_id": format(link.context.trace_id, "032x"),
                "span_id": format(link.context.span_id, "016x"),
                "attributes": _plain_attributes(link.attributes),
            }
            for link in span.links
        ]
    return found


@dataclass
class ExportStats:
    """What the exporter did with the spans it was given (shown by `/healthz`)."""

    spooled: int = 0  # spans logged to the spool before being stored
    stored: int = 0  # spans written to the database by the exporter
    recovered: int = 0  # spans a previous process spooled and this one delivered at start
    left_in_spool: int = 0  # spans still on disk at shutdown: delivered at the next start
    lost: int = 0  # spans neither stored nor spooled (the log says why)
    spool_errors: int = 0  # batches the spool could not take (written directly instead)

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class SqlSpanExporter(SpanExporter):
    """Stores span batches; a span id already stored is skipped.

    Without a spool, `export()` writes the batch in one transaction. With a spool, `export()`
    logs the batch to disk (fsync'd if the spool is) and returns at once; a writer thread
    stores it and then releases it from the spool. A SIGKILL then loses only the spans the
    batch processor had not yet handed over (at most one `schedule_delay_millis`); whatever was
    logged is delivered by the next process to start on the same spool. A locked or
    unreachable database is retried until shutdown, when what is left stays in the spool.

    The writer commits at most once every `store_every_s`: a batch that comes sooner after the
    last commit waits for the rest of that interval, and every batch that came meanwhile goes
    into the same transaction. The spool already holds them, so this costs no durability; a
    transaction pays for each page it changes (on SQLite, each goes to the WAL), and with many
    runs recording at once most of those pages are index pages that every batch touches again.
    A span after a quiet interval is stored at once; `force_flush` and shutdown never wait.
    """

    MERGE_MAX_SPANS = 20_000  # spans in one transaction of merged batches, at most

    def __init__(
        self, store: Store, spool: Spool | None = None, store_every_s: float = 0.0
    ) -> None:
        self._store = store
        self._spool = spool
        self._store_every_s = store_every_s
        self._hurry = threading.Event()  # set while a flush (or shutdown) waits: no interval
        self._flushes = 0
        self._stopped = False
        self._abandon = False
        self.stats = ExportStats()
        self._queue: queue.Queue[tuple[int, list[SpanDict]] | None] = queue.Queue()
        self._idle = threading.Condition()
        self._unstored = 0  # batches handed to the writer and not yet done with
        self._writer: threading.Thread | None = None
        if spool is not None:
            self._unstored = 1  # the spool left by an earlier process is delivered first
            self._writer = threading.Thread(target=self._run, name="tracecard-store", daemon=True)
            self._writer.start()

    @property
    def spool(self) -> Spool | None:
        return self._spool

    def export(self, spans: Sequence[ReadableSpan | SpanDict]) -> SpanExportResult:
        """Store (or spool) a batch: SDK spans, and the recorder's spans already as rows."""
        if self._stopped:
            return SpanExportResult.FAILURE
        batch = [s if isinstance(s, dict) else readable_to_dict(s) for s in spans]
        if self._spool is None:
            return self._store_now(batch)
        try:
            segment = self._spool.log(batch)
        except OSError:
            log.exception("could not spool %d spans: storing them directly", len(batch))
            self.stats.spool_errors += 1
            return self._store_now(batch)
        self.stats.spooled += len(batch)
        with self._idle:
            self._unstored += 1
        self._queue.put((segment, batch))
        return SpanExportResult.SUCCESS

    def _store_now(self, batch: list[SpanDict]) -> SpanExportResult:
        try:
            self._store.insert_spans(batch)
        except Exception:  # the processor drops a failed batch: say so loudly
            log.exception("could not store %d spans", len(batch))
            self.stats.lost += len(batch)
            return SpanExportResult.FAILURE
        self.stats.stored += len(batch)
        return SpanExportResult.SUCCESS

    def _keep_trying(self) -> bool:
        return not self._abandon

    def _send_recovered(self, batch: list[SpanDict]) -> bool:
        try:
            self._store.insert_spans(batch, keep_trying=self._keep_trying)
        except DatabaseBusy:
            return False
        self.stats.recovered += len(batch)
        return True

    def _done(self) -> None:
        with self._idle:
            self._unstored -= 1
            self._idle.notify_all()

    def _run(self) -> None:
        assert self._spool is not None
        try:
            recovered = self._spool.deliver(self._send_recovered)
            if recovered:
                log.warning("delivered %d spans spooled by an earlier process", recovered)
        except Exception:
            log.exception("could not deliver the spool of an earlier process (kept on disk)")
        finally:
            self._done()
        committed = float("-inf")  # when the last transaction ended (monotonic)
        stop = False
        while not stop and (item := self._queue.get()) is not None:
            wait = committed + self._store_every_s - time.monotonic()
            if wait > 0:
                self._hurry.wait(wait)  # the batches of the rest of the interval join this one
            items = [item]
            stop = self._take_queued(items)
            self._store_logged(items)
            committed = time.monotonic()
            del item, items  # the thread holds no batch while it waits for the next one

    def _take_queued(self, items: list[tuple[int, list[SpanDict]]]) -> bool:
        """Add the batches queued meanwhile to `items`, up to `MERGE_MAX_SPANS` spans (a backlog,
        e.g. after the database was locked, is stored in bounded transactions); True when
        shutdown was asked for."""
        spans = sum(len(batch) for _, batch in items)
        while spans < self.MERGE_MAX_SPANS:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                return False
            if more is None:
                return True
            items.append(more)
            spans += len(more[1])
        return False

    def _store_logged(self, items: list[tuple[int, list[SpanDict]]]) -> None:
        """Store spooled batches in one transaction, then release them from the spool."""
        assert self._spool is not None
        batch = items[0][1] if len(items) == 1 else [span for _, part in items for span in part]
        try:
            self._store.insert_spans(batch, keep_trying=self._keep_trying)
            self.stats.stored += len(batch)
            for segment, _ in items:
                self._spool.release(segment)
        except DatabaseBusy:
            self.stats.left_in_spool += len(batch)
        except Exception:  # kept in the spool: the next start delivers it
            log.exception("could not store %d spooled spans (kept in the spool)", len(batch))
            self.stats.left_in_spool += len(batch)
        finally:
            for _ in items:
                self._done()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every batch exported so far is stored (or left in the spool); the writer
        does not wait out its commit interval meanwhile."""
        with self._idle:
            self._flushes += 1
            self._hurry.set()
            try:
                return self._idle.wait_for(lambda: self._unstored <= 0, timeout_millis / 1000)
            finally:
                self._flushes -= 1
                if not self._flushes and not self._stopped:
                    self._hurry.clear()

    def shutdown(self, timeout_millis: int = 30000) -> None:
        """Store what was exported, for up to `timeout_millis`; what remains stays spooled."""
        self._stopped = True
        self._hurry.set()  # (stays set: nothing waits out an interval from now on)
        if self._writer is None or self._spool is None:
            return
        if not self.force_flush(timeout_millis):
            log.warning("the database did not take every span in time: the rest stays spooled")
        self._abandon = True
        self._queue.put(None)
        self._writer.join(5)
        self._spool.close()
        if self.stats.left_in_spool:
            log.warning(
                "%d spans left in the spool %s: the next start delivers them",
                self.stats.left_in_spool,
                self._spool.path.parent,
            )


DROP_WARNING_EVERY_S = 10.0  # a full queue is logged at its first drop, then at most this often


class _CountingQueue(collections.deque[Any]):
    """The SDK's span queue (a bounded deque: producers `appendleft`, its worker `pop`s the oldest)
    that counts each span it drops, exactly: the full-queue test and the eviction happen under
    one producer lock. The worker only removes spans, so it can only make room in between; the
    SDK's own check before `appendleft` raced with it and counted a span that was then stored.
    """

    def __init__(self, size: int, dropped: Callable[[], None]) -> None:
        super().__init__([], size)
        self._producers = threading.Lock()
        self._on_drop = dropped

    def appendleft(self, span: Any) -> None:
        with self._producers:
            if self.maxlen is not None and len(self) >= self.maxlen:
                try:
                    self.pop()  # the oldest, as the SDK's bounded deque would
                except IndexError:
                    pass  # the worker emptied it meanwhile: nothing dropped
                else:
                    self._on_drop()
            super().appendleft(span)


class StoringBatchProcessor(BatchSpanProcessor):
    """The SDK's batch processor whose `force_flush` also waits for the exporter's writer, so
    that a flush means "committed" (the SDK's does not call the exporter's `force_flush`).

    The SDK drops a span (the oldest queued) when its queue holds `max_queue_size` spans, and
    every span that ends after shutdown; it only logs a line per span. `queue_dropped` counts
    them (`/healthz`), and the log says how many, with the setting to raise.
    """

    def __init__(self, exporter: SqlSpanExporter, **options: Any) -> None:
        super().__init__(exporter, **options)
        self.exporter = exporter
        self.queue_dropped = 0
        self._max_queue = int(options.get("max_queue_size") or 2048)
        self._warned_at = float("-inf")
        batch = self._batch_processor
        batch._queue = _CountingQueue(batch._max_queue_size, self._dropped)

    def on_end(self, span: ReadableSpan) -> None:
        batch = self._batch_processor
        if span.context is not None and span.context.trace_flags.sampled and batch._shutdown:
            self._dropped()  # the SDK ignores a span that ends after shutdown
        if not isinstance(batch._queue, _CountingQueue):  # a new queue after a fork
            batch._queue = _CountingQueue(batch._max_queue_size, self._dropped)
        super().on_end(span)

    def emit_row(self, row: SpanDict) -> None:
        """Queue a span that is already its stored row (the recorder's spans: no `ReadableSpan`
        is built for them); dropped and counted as `on_end` does after shutdown."""
        batch = self._batch_processor
        if batch._shutdown:
            self._dropped()
            return
        queue = batch._queue
        if not isinstance(queue, _CountingQueue):  # a new queue after a fork
            queue = batch._queue = _CountingQueue(batch._max_queue_size, self._dropped)
        # the SDK's `emit` without its `os.getpid()` (a syscall a span: the SDK re-arms its
        # worker after a fork with `os.register_at_fork` too) and its self-metrics; the queue
        # counts what it drops
        queue.appendleft(row)
        if len(queue) >= batch._max_export_batch_size and not batch._worker_awaken.is_set():
            batch._worker_awaken.set()

    def _dropped(self) -> None:
        self.queue_dropped += 1
        now = time.monotonic()
        if now - self._warned_at >= DROP_WARNING_EVERY_S:
            self._warned_at = now
            log.warning(
                "%d spans dropped so far: the span queue was full (recording.batch_max_queue = "
                "%d) or recording had stopped; the database is slower than the traffic",
                self.queue_dropped,
                self._max_queue,
            )

    def shutdown(self) -> None:
        super().shutdown()  # type: ignore[no-untyped-call]
        if self.queue_dropped:
            log.warning("%d spans were dropped by the full span queue", self.queue_dropped)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        timeout = 30000 if timeout_millis is None else timeout_millis
        return super().force_flush(timeout) and self.exporter.force_flush(timeout)
