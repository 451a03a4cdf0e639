"""A span built by hand for the recorder: a plain dict of attributes, one stored row at the end.

The SDK's `Tracer.start_span` runs the sampler, wraps attributes in a locked
`BoundedAttributes` that checks every value, and takes a lock on each `set_attribute`; the
proxy's attributes are known-good strings, numbers and booleans, so this span keeps them in a
dict. When it ends, the storing processor (`StoringBatchProcessor`: the same batch queue, spool
and SQL exporter) gets the span as the row it stores, built once; a `ReadableSpan` is built only
for the other processors (an OTLP fan-out to a collector), which still get a proper SDK span.
Every span is sampled: tracecard records every call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

from tracecard.traces.exporter import STORED_KIND, STORED_STATUS, StoringBatchProcessor
from tracecard.traces.store import SpanDict

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET = Status(StatusCode.UNSET)
_UNSET_ROW = {"code": STORED_STATUS[StatusCode.UNSET], "message": None}  # (copied per row)
_CLIENT = STORED_KIND[SpanKind.CLIENT]
# `on_start` of these processors does nothing: a span's start is not handed to them
_NO_START = frozenset(
    {SpanProcessor.on_start, BatchSpanProcessor.on_start, SimpleSpanProcessor.on_start}
)


class SpanSink:
    """Where finished spans go: the tracer's processor, resource and scope, read once."""

    __slots__ = (
        "_others",
        "_rows",
        "_seen",
        "_starts",
        "id_generator",
        "processor",
        "resource",
        "resource_row",
        "scope",
    )

    def __init__(self, tracer: trace.Tracer) -> None:
        processor: SpanProcessor | None = getattr(tracer, "span_processor", None)
        if processor is None:
            raise TypeError("the recorder needs an OpenTelemetry SDK tracer (TracerProvider)")
        self.processor = processor
        self.resource: Resource = getattr(tracer, "resource", None) or Resource.get_empty()
        self.id_generator = getattr(tracer, "id_generator")  # noqa: B009  # SDK attribute
        info = getattr(tracer, "instrumentation_info", None)
        self.scope = (
            InstrumentationScope(info.name, info.version, info.schema_url)
            if info is not None
            else InstrumentationScope("tracecard")
        )
        # the resource as stored, one dict for every span (the store encodes it once a batch)
        self.resource_row = {
            k: list(v) if isinstance(v, tuple) else v for k, v in self.resource.attributes.items()
        }
        self._seen: tuple[SpanProcessor, ...] | None = None
        self._rows: tuple[StoringBatchProcessor, ...] = ()
        self._others: tuple[SpanProcessor, ...] = ()
        self._starts: tuple[SpanProcessor, ...] = ()

    def targets(self) -> tuple[tuple[StoringBatchProcessor, ...], tuple[SpanProcessor, ...]]:
        """The processors that take stored rows, and the others (which get `ReadableSpan`s);
        found again when the provider's list changes (it is a tuple, replaced on each add)."""
        processors = getattr(self.processor, "_span_processors", None)
        if not isinstance(processors, tuple):  # not the SDK's multi-processor: one processor
            processors = (self.processor,)
        if processors is not self._seen:
            self._seen = processors
            self._rows = tuple(p for p in processors if isinstance(p, StoringBatchProcessor))
            self._others = tuple(
                p
                for p in processors
                if not isinstance(p, StoringBatchProcessor)
                and type(p).on_end is not SpanProcessor.on_end  # (the base class ignores it)
            )
            # the processors that do something when a span starts (the SDK's batch and simple
            # processors do nothing then; the OTLP trace index does)
            self._starts = tuple(p for p in processors if type(p).on_start not in _NO_START)
        return self._rows, self._others

    def start(
        self,
        name: str,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        start_ns: int | None = None,
    ) -> RecordedSpan:
        """An open span under `parent` (a new trace when None or invalid)."""
        if parent is not None and parent.is_valid:
            trace_id = parent.trace_id
        else:
            parent = None
            trace_id = self.id_generator.generate_trace_id()
        context = SpanContext(
            trace_id, self.id_generator.generate_span_id(), is_remote=False, trace_flags=_SAMPLED
        )
        span = RecordedSpan(self, name, context, parent, attributes, start_ns or time.time_ns())
        # processors see it start too (the OTLP ingest indexes trace id -> run id there);
        # duck-typed: they read `attributes` and `get_span_context()` as of an SDK span
        self.targets()
        for processor in self._starts:
            processor.on_start(span)  # type: ignore[arg-type]
        return span


def parent_of(context: Context | None) -> SpanContext | None:
    """The span context that `context` names as current, if any."""
    if context is None:
        return None
    return trace.get_current_span(context).get_span_context()


class RecordedSpan(trace.Span):
    """An open span: attributes, events and status in plain fields until `end()`."""

    __slots__ = (
        "_sink",
        "name",
        "context",
        "parent",
        "attributes",
        "events",
        "status",
        "start_ns",
        "end_ns",
        "links",
    )

    def __init__(
        self,
        sink: SpanSink,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        start_ns: int,
    ) -> None:
        self._sink = sink
        self.name = name
        self.context = context
        self.parent = parent
        self.attributes = attributes
        self.events: list[Event] = []
        self.status = _UNSET
        self.start_ns = start_ns
        self.end_ns: int | None = None
        self.links: list[Link] = []  # added before `end()` (a tool span's requesting model span)

    def end(self, end_time: int | None = None) -> None:
        """Finish the span and hand it to the processor (once; later calls do nothing)."""
        if self.end_ns is not None:
            return
        self.end_ns = end_time or time.time_ns()
        rows, others = self._sink.targets()
        if rows:
            row = self.row()
            for processor in rows:
                processor.emit_row(row)
        if others:
            readable = self.readable()
            for other in others:
                other.on_end(readable)

    def row(self) -> SpanDict:
        """The ended span as the store's span dict (`readable_to_dict` of its `ReadableSpan`,
        without building one); the attributes dict is handed over, not copied."""
        context, parent, status = self.context, self.parent, self.status
        row: SpanDict = {
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
            "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
            "name": self.name,
            "kind": _CLIENT,
            "start_time_unix_nano": self.start_ns,
            "end_time_unix_nano": self.end_ns,
            "status": (
                {**_UNSET_ROW}
                if status is _UNSET
                else {"code": STORED_STATUS[status.status_code], "message": status.description}
            ),
            "attributes": self.attributes,
            "events": [
                {
                    "name": e.name,
                    "time_unix_nano": e.timestamp,
                    "attributes": dict(e.attributes) if e.attributes else {},
                }
                for e in self.events
            ]
            if self.events
            else [],
            "resource": self._sink.resource_row,
            "scope": self._sink.scope.name,
        }
        if self.links:
            row["links"] = [
                {
                    "trace_id": format(link.context.trace_id, "032x"),
                    "span_id": format(link.context.span_id, "016x"),
                    "attributes": dict(link.attributes) if link.attributes else {},
                }
                for link in self.links
            ]
        return row

    def readable(self) -> ReadableSpan:
        """The ended span as the SDK's `ReadableSpan` (for processors other than the store's)."""
        sink = self._sink
        return ReadableSpan(
            name=self.name,
            context=self.context,
            parent=self.parent,
            resource=sink.resource,
            attributes=self.attributes,
            events=self.events,
            kind=SpanKind.CLIENT,
            status=self.status,
            start_time=self.start_ns,
            end_time=self.end_ns,
            instrumentation_scope=sink.scope,
            links=self.links,
        )

    def get_span_context(self) -> SpanContext:
        return self.context

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self.end_ns is None and value is not None:  # the SDK drops None values too
            self.attributes[key] = value

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        if self.end_ns is None:
            self.events.append(Event(name, attributes, timestamp))

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self.end_ns is None and context.is_valid:
            self.links.append(Link(context, attributes))

    def update_name(self, name: str) -> None:
        self.name = name

    def is_recording(self) -> bool:
        return self.end_ns is None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.end_ns is None:
            self.status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        event: dict[str, Any] = {
            "exception.type": type(exception).__name__,
            "exception.message": str(exception),
        }
        event.update(attributes or {})
        self.add_event("exception", event, timestamp)
