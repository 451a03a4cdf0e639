"""tracecard's own credentials in a request: the token header, the sign-in cookie, and the
headers a proxied request keeps once they are taken out (they never reach an upstream)."""

from __future__ import annotations

import hmac
from typing import Final

from tracecard.server.login import TOKEN_COOKIE

TOKEN_HEADER: Final = b"tracecard-token"


def cookies(header: str | None) -> list[tuple[str, str]]:
    """The name=value pairs of a Cookie header."""
    pairs = []
    for part in (header or "").split(";"):
        name, equals, value = part.strip().partition("=")
        if equals:
            pairs.append((name, value))
    return pairs


def has_cookie(header: str | None, name: str) -> bool:
    """True when the Cookie header carries a cookie called `name`."""
    return any(key == name for key, _ in cookies(header))


def cookie_token_matches(header: str | None, expected: bytes) -> bool:
    """True when the sign-in cookie holds `expected` (compared in constant time)."""
    return any(
        key == TOKEN_COOKIE and hmac.compare_digest(value.encode("latin-1"), expected)
        for key, value in cookies(header)
    )


def without_own_credentials(
    raw: list[tuple[bytes, bytes]], token: bytes | None, own_cookies: frozenset[str]
) -> list[tuple[bytes, bytes]]:
    """The headers minus tracecard's token (header or Bearer) and its own cookies."""
    kept: list[tuple[bytes, bytes]] = []
    for name, value in raw:
        if name == TOKEN_HEADER:
            continue
        if name == b"authorization" and token is not None and value[:7].lower() == b"bearer ":
            if hmac.compare_digest(value[7:].strip(), token):
                continue
        if name == b"cookie":
            text = value.decode("latin-1")
            if any(key in own_cookies for key, _ in cookies(text)):
                others = [f"{k}={v}" for k, v in cookies(text) if k not in own_cookies]
                if not others:
                    continue
                value = "; ".join(others).encode("latin-1")
        kept.append((name, value))
    return kept
