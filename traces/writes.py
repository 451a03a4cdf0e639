"""Span writes that never lose a batch for one bad row.

A batch is written in one transaction. When it fails because the database is busy (SQLite
`database is locked` past the busy timeout, PostgreSQL unreachable), it is retried with backoff
for as long as the caller allows. When it fails because of its content, every row is written on
its own; a row that still fails is written in a readable form (every string cleaned, numbers
that do not fit stored as text, the error in `tracecard.store.error`). Only a row that cannot be
written even so is dropped, counted in `WriteHealth`, logged with its span id and appended to the
dead-letter file (`tracecard.traces.deadletter`) when the store has one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import DBAPIError, OperationalError

from tracecard.traces.deadletter import DeadLetters
from tracecard.traces.engine import clean_text, clean_value
from tracecard.traces.models import U64

log = logging.getLogger(__name__)

SpanDict = dict[str, Any]
STORE_ERROR = "tracecard.store.error"  # set on a span stored in its readable form
BACKOFF_START_S = 0.05
BACKOFF_MAX_S = 2.0
_I32 = 1 << 31


class DatabaseBusy(Exception):
    """The database stayed locked or unreachable for longer than the caller would wait."""


@dataclass
class WriteHealth:
    """What the span writes had to do to store everything (shown by `/healthz`)."""

    repaired: int = 0  # rows stored in their readable form
    dropped: int = 0  # rows that could not be stored at all
    dead_lettered: int = 0  # dropped rows kept in the dead-letter file instead
    busy_retries: int = 0  # batch attempts that met a locked or unreachable database
    last_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, what: str, error: str | None = None) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)
            if error is not None:
                self.last_error = error[:500]

    def as_dict(self) -> dict[str, Any]:
        return {
            "repaired": self.repaired,
            "dropped": self.dropped,
            "dead_lettered": self.dead_lettered,
            "busy_retries": self.busy_retries,
            "last_error": self.last_error,
        }


def is_busy(exc: BaseException) -> bool:
    """A failure of the database, not of the rows: locked, or the connection is gone."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError)


def _describe(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _readable_scalar(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < U64 else str(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _readable_scalar(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_readable_scalar(v) for v in value]
    return clean_text(repr(value))


def _readable_int(value: Any, limit: int, low: int = 0) -> tuple[int, Any]:
    """`value` when it is an int in [low, limit), else 0 and the original for the record."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value < limit:
        return value, None
    return 0, value


def readable_span(span: SpanDict, error: str) -> SpanDict:
    """`span` in a form every database takes; what had to change is named in the attributes."""
    attributes = _readable_scalar(dict(span.get("attributes") or {}))
    attributes[STORE_ERROR] = clean_text(error)
    status = span.get("status") or {}
    fixed: dict[str, Any] = {}
    start, fixed["start_time_unix_nano"] = _readable_int(span.get("start_time_unix_nano"), U64)
    end, fixed["end_time_unix_nano"] = _readable_int(span.get("end_time_unix_nano") or 0, U64)
    kind, fixed["kind"] = _readable_int(span.get("kind") or 0, _I32)
    code, fixed["status.code"] = _readable_int(status.get("code") or 0, _I32)
    for key, original in fixed.items():
        if original is not None:
            attributes[f"tracecard.store.original.{key}"] = clean_text(str(original))
    events = []
    for event in span.get("events") or []:
        event = event if isinstance(event, dict) else {"name": repr(event)}
        when, _ = _readable_int(event.get("time_unix_nano") or 0, U64)
        events.append(
            {
                "name": clean_text(str(event.get("name") or "")),
                "time_unix_nano": when,
                "attributes": _readable_scalar(dict(event.get("attributes") or {})),
            }
        )
    message = status.get("message")
    return {
        **span,
        "name": clean_text(str(span.get("name") or "")),
        "parent_span_id": span.get("parent_span_id"),
        "kind": kind,
        "start_time_unix_nano": start,
        "end_time_unix_nano": end or None,
        "status": {"code": code, "message": clean_text(str(message)) if message else None},
        "attributes": attributes,
        "events": events,
        "resource": clean_value(_readable_scalar(dict(span.get("resource") or {}))),
        "scope": clean_text(str(span["scope"])) if span.get("scope") is not None else None,
    }


def retry_busy(
    write: Callable[[], None],
    health: WriteHealth,
    keep_trying: Callable[[], bool],
) -> None:
    """Run `write` until it succeeds; on a busy database wait (doubling, capped) and retry while
    `keep_trying()`, else raise `DatabaseBusy`. Any other error is raised at once."""
    delay = BACKOFF_START_S
    while True:
        try:
            write()
            return
        except Exception as exc:
            if not is_busy(exc):
                raise
            health.count("busy_retries", _describe(exc))
            if not keep_trying():
                raise DatabaseBusy(_describe(exc)) from exc
            log.warning("database busy (%s): retrying in %.2f s", _describe(exc), delay)
            time.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)


def write_spans(
    insert: Callable[[list[SpanDict]], None],
    spans: list[SpanDict],
    health: WriteHealth,
    keep_trying: Callable[[], bool],
    dead_letters: DeadLetters | None = None,
) -> int:
    """Write `spans` with `insert` (one transaction per call): the batch, else row by row, else
    each bad row in its readable form, else (dropped) into `dead_letters`. Returns how many
    rows were written to the database."""
    try:
        retry_busy(lambda: insert(spans), health, keep_trying)
        return len(spans)
    except DatabaseBusy:
        raise
    except Exception as exc:
        if len(spans) > 1:
            log.warning("a batch of %d spans failed (%s): writing row by row", len(spans), exc)
        batch_error = exc
    written = 0
    for span in spans:
        try:
            retry_busy(lambda s=span: insert([s]), health, keep_trying)  # type: ignore[misc]
            written += 1
            continue
        except DatabaseBusy:
            raise
        except Exception as exc:
            error = _describe(exc if len(spans) > 1 else batch_error)
        try:
            fixed = readable_span(span, error)
            retry_busy(lambda f=fixed: insert([f]), health, keep_trying)  # type: ignore[misc]
        except DatabaseBusy:
            raise
        except Exception as exc:
            health.count("dropped", f"span {span.get('span_id')!r}: {_describe(exc)}")
            if dead_letters is not None and dead_letters.keep(span, _describe(exc)):
                health.count("dead_lettered")
                where = f"kept in {dead_letters.path}"
            else:
                where = (
                    "not kept anywhere" if dead_letters is None else "the dead-letter file is full"
                )
            log.error("span %r could not be stored (%s): %s", span.get("span_id"), where, exc)
            continue
        health.count("repaired", f"span {span.get('span_id')!r}: {error}")
        log.warning("span %r stored in readable form: %s", span.get("span_id"), error)
        written += 1
    return written
