"""The database's own secret: created once, read by every tracecard process on that database.

Two keys are derived from it (HMAC with a label, so neither reveals the other): the key of the
fingerprints that replace redacted values, and the credential of the server's own probe traffic.
The secret itself never appears in a span, an export or an API answer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy.exc import IntegrityError

from tracecard.traces.models import SecretRow
from tracecard.traces.store import Store

__all__ = ["database_secret", "derive_key"]

_NAME = "instance"


def database_secret(store: Store) -> bytes:
    """The database's secret, created on first use (a concurrent creator's value wins once)."""
    with store.session() as session:
        row = session.get(SecretRow, _NAME)
        if row is not None:
            return bytes.fromhex(row.value)
    try:
        with store.writing() as session:
            session.add(SecretRow(name=_NAME, value=secrets.token_hex(32)))
    except IntegrityError:
        pass  # another process created it first: use theirs
    with store.session() as session:
        row = session.get(SecretRow, _NAME)
        assert row is not None
        return bytes.fromhex(row.value)


def derive_key(secret: bytes, label: str) -> bytes:
    """A key for one purpose (`fingerprint`, `verifier`) derived from the database secret."""
    return hmac.new(secret, f"tracecard {label}".encode(), hashlib.sha256).digest()
