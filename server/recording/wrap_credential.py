"""`tracecard wrap`'s credential: how its OTLP spans are told from spans an agent posts.

An agent can post any span to `POST /v1/traces`, including one that looks exactly like a
recorded `tools/call`. Such spans are evidence only when tracecard observed the call: the proxy
and the stdio bridge record it themselves, and `tracecard wrap` proves its spans are its own.

The shim asks the server for the run's credential (`POST /api/runs/{id}/wrap-credential`,
in `ingest`): an
HMAC of the run id under a key derived from the database secret, so it is bound to one run and
needs no storage. The shim keeps it in memory (never in the environment of the command it
starts, never on the wire to that command) and puts on each span it ships a MAC of the span's
trace id, span id, run id and name under that credential (`tracecard.wrap.mac`). Ingest checks
the MAC in constant time against the run the span joined and removes it before storage; a span
without a valid MAC that claims to be tracecard's recording is stored with
`tracecard.evidence = agent_reported` and never scored (`tracecard.server.recording.ingested`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Final

from tracecard.traces.store import SpanDict

__all__ = ["WRAP_MAC", "credential", "sign", "verify"]

WRAP_MAC: Final = "tracecard.wrap.mac"  # on the wire only: ingest removes it before storage


def credential(wrap_key: bytes, run_id: str) -> str:
    """The run's wrap credential (hex): HMAC-SHA256 of the run id under the wrap key."""
    return hmac.new(wrap_key, b"run:" + run_id.encode(), hashlib.sha256).hexdigest()


def _message(span: SpanDict, run_id: str) -> bytes:
    return "\x00".join(
        (str(span.get("trace_id")), str(span.get("span_id")), run_id, str(span.get("name")))
    ).encode("utf-8", "surrogatepass")


def sign(run_credential: str, span: SpanDict, run_id: str) -> str:
    """The MAC `tracecard wrap` puts on a span it recorded for `run_id`."""
    key = bytes.fromhex(run_credential)
    return hmac.new(key, _message(span, run_id), hashlib.sha256).hexdigest()


def verify(
    wrap_key: bytes, span: SpanDict, run_id: str, mac: Any, known: dict[str, str] | None = None
) -> bool:
    """True when `mac` is the span's MAC under `run_id`'s credential (constant time); `known`
    keeps the credentials already derived (one per run, not one per span)."""
    if not isinstance(mac, str) or not wrap_key or not run_id:
        return False
    known = {} if known is None else known
    run_credential = known.get(run_id)
    if run_credential is None:
        run_credential = known[run_id] = credential(wrap_key, run_id)
    expected = sign(run_credential, span, run_id)
    return hmac.compare_digest(mac.encode("latin-1", "replace"), expected.encode("latin-1"))
