"""Shipping the wrap shim's spans: OTLP protobuf to `{server}/v1/traces`, a spool when it fails.

Runs on its own thread; the agent's pipes never wait for it. Spans that cannot be delivered are
appended to the shared file of a `tracecard.traces.spool.Spool` (under a file lock, shared by
every wrap on the machine; the server's own write-ahead spool is the same class) and sent,
oldest first, on the next successful delivery.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tracecard.traces.otlp import encode_protobuf
from tracecard.traces.spool import Spool
from tracecard.traces.store import SpanDict

log = logging.getLogger(__name__)

BATCH = 512
SEND_TIMEOUT_S = 3.0
RETRY_MAX_S = 5.0


def default_spool() -> Path:
    """`$XDG_CACHE_HOME/tracecard/spool/spans.jsonl` (default `~/.cache/...`)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tracecard" / "spool" / "spans.jsonl"


class Shipper:
    """Batches spans from a queue and posts them as OTLP protobuf; spools what fails."""

    def __init__(
        self,
        server: str | None,
        spool: Spool,
        resource: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        self.endpoint = f"{server.rstrip('/')}/v1/traces" if server else None
        self.headers = {"content-type": "application/x-protobuf", **(headers or {})}
        self.spool = spool
        self.resource = resource
        self.queue: queue.Queue[SpanDict | None] = queue.Queue(maxsize=100_000)
        self.dropped = 0
        self._client = httpx.Client(timeout=SEND_TIMEOUT_S, trust_env=False)
        self._thread = threading.Thread(target=self._loop, name="tracecard-ship", daemon=True)
        self._retry_at = 0.0
        self._backoff = 0.5

    def start(self) -> None:
        self._thread.start()

    def put(self, span: SpanDict) -> None:
        """Never blocks: when the queue is full the span is counted as dropped."""
        try:
            self.queue.put_nowait(span)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued (sent or spooled), then stop."""
        self.queue.put(None)
        self._thread.join(timeout)
        self._client.close()

    def _post(self, spans: list[SpanDict]) -> bool:
        if self.endpoint is None:
            return False
        try:
            response = self._client.post(
                self.endpoint,
                content=encode_protobuf(spans, self.resource),
                headers=self.headers,
            )
        except httpx.HTTPError as exc:
            log.debug("could not ship %d spans to %s: %s", len(spans), self.endpoint, exc)
            return False
        if response.status_code >= 500 or response.status_code == 429:
            return False
        if response.status_code >= 400:  # the server will never take these: do not retry
            log.warning("tracecard refused %d spans: %s", len(spans), response.text[:300])
        return True

    def _ship(self, batch: list[SpanDict]) -> None:
        now = time.monotonic()
        if batch and (now < self._retry_at or not self._post(batch)):
            self.spool.append(batch)
            self._failed(now)
            return
        if self.spool.pending() and now >= self._retry_at:
            self.spool.deliver(self._post)
            if self.spool.pending():
                self._failed(now)
            else:
                self._backoff = 0.5

    def _failed(self, now: float) -> None:
        if now >= self._retry_at:
            self._retry_at = now + self._backoff
            self._backoff = min(self._backoff * 2, RETRY_MAX_S)

    def _loop(self) -> None:
        done = False
        while not done:
            batch: list[SpanDict] = []
            deadline = time.monotonic() + 0.2
            while len(batch) < BATCH:
                try:
                    item = self.queue.get(timeout=max(deadline - time.monotonic(), 0.01))
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
            if done:
                self._retry_at = 0.0  # one last attempt at exit, then the spool keeps the rest
            try:
                self._ship(batch)
            except Exception:  # the shim must outlive any recording failure
                log.exception("shipping spans failed")
