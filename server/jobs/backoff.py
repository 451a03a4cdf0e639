"""A 429 from a model upstream backs its limits key off for every worker (docs/workers.md).

The key is `[limits.model.NAME]`'s; its backoff is one row in `job_backoffs`, beside the queues'
database-held limits, so every tracecard process on the database (each worker's proxy, a
replica) honours it: before forwarding a request to model upstream NAME, the proxy reads the
row and waits until its `until`; a 429 answer moves `until` forward (never back) by the answer's
`Retry-After`, else by a delay that doubles with each 429 in a row (1 s, 2 s, ... 60 s; a 429
more than a minute after the last backoff ended starts again at 1 s). Upstreams without a
`[limits.model]` entry are never held.

Every instant here is the database's clock, never a worker's: `until` is written as the
database's now plus the delay, and read back with the database's now beside it, so a worker
whose clock is off neither ignores another's backoff nor stretches it; what a worker measures
itself is only the duration it then sleeps. An HTTP-date `Retry-After` is read against the
answer's own `Date` (the upstream's clock on both sides), else this machine's clock.
"""

from __future__ import annotations

import asyncio
import email.utils
from datetime import UTC, datetime, timedelta

import anyio.to_thread
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from tracecard.server.runtime import Runtime
from tracecard.server.settings import Settings
from tracecard.traces.db_clock import as_instant, database_now, now_clause
from tracecard.traces.models import JobBackoffRow
from tracecard.traces.store import Store

__all__ = ["ModelBackoff", "install_backoff", "retry_after_s"]

FIRST_S = 1.0  # the delay after a 429 that says no Retry-After; it doubles each time in a row
MAX_S = 60.0  # no backoff is longer, whatever an upstream asks
MAX_WAITS = 20  # a request waits through at most this many extended backoffs, then goes


def _http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def retry_after_s(value: str | None, now: datetime) -> float | None:
    """`Retry-After` in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    when = _http_date(text)
    return None if when is None else max(0.0, (when - now).total_seconds())


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class ModelBackoff:
    """The proxy's side: `hold` before a model request, `observe` its answer's status."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.names = set(settings.limits.get("model", {}))

    async def hold(self, upstream: str) -> float:
        """Wait while upstream's key is backed off (by any worker); returns the seconds waited."""
        if upstream not in self.names:
            return 0.0
        waited = 0.0
        for _ in range(MAX_WAITS):
            delay = await anyio.to_thread.run_sync(self.remaining_s, upstream)
            if delay <= 0:
                break
            delay = min(delay, MAX_S)
            await asyncio.sleep(delay)
            waited += delay
        return waited

    async def observe(
        self, upstream: str, status: int, retry_after: str | None, date: str | None = None
    ) -> None:
        """After an answer's head (its `Retry-After` and `Date`): a 429 backs the key off for
        every worker."""
        if upstream in self.names and status == 429:
            await anyio.to_thread.run_sync(self._record, upstream, retry_after, date)

    def remaining_s(self, upstream: str) -> float:
        """Seconds left in upstream's backoff (0 when none), by the database's clock."""
        with self.store.session() as session:
            found = session.execute(
                select(col(JobBackoffRow.until), now_clause(session)).where(
                    col(JobBackoffRow.key) == f"model:{upstream}"
                )
            ).first()
        if found is None:
            return 0.0
        until, now = found
        return max(0.0, (_aware(until) - as_instant(now)).total_seconds())

    def _record(self, upstream: str, retry_after: str | None, date: str | None = None) -> None:
        key, rows = f"model:{upstream}", JobBackoffRow
        # Retry-After as a date: against the answer's own Date, else this machine's clock
        asked = retry_after_s(retry_after, _http_date(date) or datetime.now(UTC))
        for _ in range(3):  # a first 429 on two workers at once: one inserts, one updates
            with self.store.session() as session:
                now = database_now(session)
                row = session.get(rows, key)
                current = _aware(row.until) if row is not None else None
            in_a_row = current is not None and (now - current).total_seconds() < MAX_S
            hits = row.hits + 1 if row is not None and in_a_row else 1
            delay = min(MAX_S, asked if asked is not None else FIRST_S * 2 ** (hits - 1))
            until = now + timedelta(seconds=delay)
            if current is not None and current >= until:
                until = current  # a backoff is only ever extended
            try:
                with self.store.writing() as session:
                    if row is None:
                        session.add(JobBackoffRow(key=key, until=until, hits=hits, updated_at=now))
                    else:
                        session.execute(
                            update(rows)
                            .where(col(rows.key) == key)
                            .values(until=until, hits=hits, updated_at=now)
                        )
                return
            except IntegrityError:
                continue


def install_backoff(runtime: Runtime) -> None:
    """Hold `[limits.model]` upstreams' requests while a 429 backs their key off."""
    if runtime.settings.limits.get("model"):
        runtime.hooks.model_backoff = ModelBackoff(runtime.store, runtime.settings)
