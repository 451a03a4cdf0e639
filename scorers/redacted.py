"""Comparing with values stored as keyed fingerprints (`[redacted:<16 hex>]`), and strictness.

A secret the recorder redacted is stored as its fingerprint under the database's key. Equality
still works: the expected value is fingerprinted with the same key (the scorer is handed that
function in `RunFacts.fingerprint`) and the fingerprints are compared, exactly (no
normalisation: a fingerprint is of the bytes as sent). Matchers that need the value itself
(regex, contains, number, approx) cannot work on a fingerprint: they give *not evaluated* with
the reason, never a silent fail.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import orjson

from ._json import normalised_equal

__all__ = [
    "CANNOT_COMPARE",
    "NotComparable",
    "contains_fingerprint",
    "equal",
    "fingerprinting",
    "is_fingerprint",
    "masked",
    "strict_equal",
]

Fingerprint = Callable[[Any], str]
_FINGERPRINT = re.compile(r"\[redacted:[0-9a-f]{16}\]")
_current: ContextVar[Fingerprint | None] = ContextVar("tracecard_fingerprint", default=None)
CANNOT_COMPARE = (
    "is redacted (stored as a keyed fingerprint): a {kind} check cannot be evaluated on it; "
    "compare it with exact/one_of/eq, or set `redact = false` on the upstream"
)


class NotComparable(Exception):
    """An equality that involves a fingerprint, with no key to fingerprint the expected value."""


def is_fingerprint(value: Any) -> bool:
    """True when `value` is a stored fingerprint (a redacted value)."""
    return isinstance(value, str) and _FINGERPRINT.fullmatch(value) is not None


@contextlib.contextmanager
def fingerprinting(fingerprint: Fingerprint | None) -> Iterator[None]:
    """Within the block, equality against fingerprints uses `fingerprint` (a scorer's facts)."""
    token = _current.set(fingerprint)
    try:
        yield
    finally:
        _current.reset(token)


def masked(value: Any) -> Any:
    """`value` as evidence may show it beside a redacted observation: its fingerprint."""
    fingerprint = _current.get()
    if fingerprint is None or not isinstance(value, str):
        return "[redacted]" if isinstance(value, str) else value
    return fingerprint(value)


def strict_equal(expected: Any, actual: Any) -> bool:
    """Equal as JSON, with no normalisation: `"Paris "` is not `"Paris"`, `1` is not `1.0`."""
    return orjson.dumps(expected, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        actual, option=orjson.OPT_SORT_KEYS
    )


def contains_fingerprint(value: Any) -> bool:
    """True when a fingerprint (a redacted value) is in `value` at any depth."""
    if isinstance(value, dict):
        return any(contains_fingerprint(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_fingerprint(v) for v in value)
    return is_fingerprint(value)


def equal(expected: Any, actual: Any, strict: bool = False) -> bool:
    """Equality as the matchers mean it, at any depth; a fingerprint in `actual` is compared
    with the fingerprint of the expected value there. Raises `NotComparable` without a key."""
    if not contains_fingerprint(actual):
        return strict_equal(expected, actual) if strict else normalised_equal(expected, actual)
    if is_fingerprint(actual):
        if is_fingerprint(expected):
            return bool(expected == actual)
        fingerprint = _current.get()
        if fingerprint is None:
            raise NotComparable("no fingerprint key to compare the redacted value with")
        return bool(fingerprint(expected) == actual)
    if isinstance(actual, dict):
        return (
            isinstance(expected, dict)
            and expected.keys() == actual.keys()
            and all(equal(expected[k], actual[k], strict) for k in actual)
        )
    if isinstance(actual, list):
        return (
            isinstance(expected, list)
            and len(expected) == len(actual)
            and all(equal(e, a, strict) for e, a in zip(expected, actual, strict=True))
        )
    return False
