"""The viewer forms' CSRF token: a signed double submit.

A browser gets a random nonce in an HttpOnly, SameSite=Strict cookie; each form carries
HMAC(key, nonce). A page on another origin can neither read the form nor compute the HMAC, and
a cookie it plants (cookies ignore ports) has no valid token. The server checks the pair on every
state-changing viewer request (`tracecard.server.security`); the pages issue it (`form_token`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Final

from litestar import Request

COOKIE: Final = "tracecard_csrf"
FIELD: Final = "csrf_token"  # the hidden form field
HEADER: Final = "x-csrf-token"  # or this request header (scripts, htmx extensions)
_NONCE_BYTES: Final = 16


def token_for(key: bytes, nonce: str) -> str:
    """The form token for a browser's nonce."""
    return hmac.new(key, nonce.encode(), hashlib.sha256).hexdigest()


def valid(key: bytes, nonce: str | None, token: str | None) -> bool:
    """Whether `token` was issued by this server for this browser's nonce."""
    if not nonce or not token:
        return False
    return hmac.compare_digest(token_for(key, nonce).encode(), token.encode("utf-8", "replace"))


def nonce_in(cookie_header: str | None) -> str | None:
    """The nonce in a `Cookie` header, if it holds one."""
    if not cookie_header or COOKIE not in cookie_header:
        return None
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(cookie_header)
    except CookieError:
        return None
    morsel = cookie.get(COOKIE)
    return morsel.value if morsel is not None and morsel.value else None


def set_cookie(nonce: str) -> str:
    """The `Set-Cookie` value that gives a browser its nonce (for this browser session)."""
    return f"{COOKIE}={nonce}; Path=/; HttpOnly; SameSite=Strict"


def form_token(request: Request, key: bytes) -> tuple[str, str | None]:  # type: ignore[type-arg]
    """(token for the page's forms, `Set-Cookie` value when the browser has no nonce yet)."""
    nonce = nonce_in(request.headers.get("cookie"))
    if nonce is not None:
        return token_for(key, nonce), None
    nonce = secrets.token_hex(_NONCE_BYTES)
    return token_for(key, nonce), set_cookie(nonce)


@dataclass(frozen=True, slots=True)
class FormTokens:
    """What the server's guard checks a viewer form with (`tracecard.server.security`)."""

    key: Callable[[], bytes]  # read per request: the key comes with the runtime
    cookie: str = COOKIE
    field: str = FIELD
    header: str = HEADER

    def valid(self, cookie_header: str | None, token: str | None) -> bool:
        """Whether `token` belongs to the nonce in this request's cookies."""
        return valid(self.key(), nonce_in(cookie_header), token)
