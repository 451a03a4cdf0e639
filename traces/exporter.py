"""The SQL span exporter: the OpenTelemetry SDK's `BatchSpanProcessor` feeds it batches.

`export()` runs on the processor's worker thread: one batch, one transaction, no event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from tracecard.traces.store import SpanDict, Store

log = logging.getLogger(__name__)

# OTLP numbering of span kinds and status codes, which is what is stored.
_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


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
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "kind": _KIND.get(span.kind, 0),
        "start_time_unix_nano": span.start_time or 0,
        "end_time_unix_nano": span.end_time,
        "status": {"code": _STATUS[span.status.status_code], "message": span.status.description},
        "attributes": attributes,
        "events": events,
        "resource": resource,
        "scope": scope,
    }


class SqlSpanExporter(SpanExporter):
    """Writes each batch in one transaction; a span id already stored is skipped."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._stopped = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped:
            return SpanExportResult.FAILURE
        try:
            self._store.insert_spans(readable_to_dict(s) for s in spans)
        except Exception:  # the processor drops a failed batch: say so loudly
            log.exception("could not store %d spans", len(spans))
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._stopped = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
