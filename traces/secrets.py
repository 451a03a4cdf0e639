"""The database's own secret: created once, read by every tracecard process on that database.

Two keys are derived from it (HMAC with a label, so neither reveals the other): the key of the
fingerprints that replace redacted values, and the credential of the server's own probe traffic.
The secret itself never appears in a span, an export or an API answer.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

import orjson
from sqlalchemy.exc import IntegrityError

from tracecard.traces.models import SecretRow
from tracecard.traces.store import Store

__all__ = [
    "FINGERPRINT",
    "database_secret",
    "derive_key",
    "fingerprint",
    "fingerprint_key",
    "is_fingerprint",
]

_NAME = "instance"
# What a redacted value is stored as: 16 hex digits of HMAC-SHA256 under the fingerprint key.
FINGERPRINT = re.compile(r"\[redacted:[0-9a-f]{16}\]")


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


def fingerprint_key(store: Store) -> bytes:
    """The key of this database's redaction fingerprints."""
    return derive_key(database_secret(store), "fingerprint")


def fingerprint(key: bytes, value: Any) -> str:
    """`[redacted:<16 hex>]`: equal values give equal fingerprints, under one database's key.

    Strings are hashed as their text, anything else as sorted-key JSON (so `"1"` and `1` differ).
    """
    if isinstance(value, str):
        raw = b"s:" + value.encode("utf-8", "surrogatepass")
    else:
        raw = b"j:" + orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)
    return f"[redacted:{hmac.new(key, raw, hashlib.sha256).hexdigest()[:16]}]"


def is_fingerprint(value: Any) -> bool:
    """True when `value` is a stored fingerprint (a redacted value)."""
    return isinstance(value, str) and FINGERPRINT.fullmatch(value) is not None
