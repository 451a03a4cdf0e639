"""API token check and response headers, as raw ASGI middleware (cheap on the proxy path)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_HEADER = b"tracecard-token"
TOKEN_COOKIE = "tracecard_token"
OPEN_PATHS = ("/healthz", "/static/", "/login")


def _presented_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == TOKEN_HEADER:
            return str(value.decode("latin-1"))
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return str(value[7:].decode("latin-1")).strip()
        if name == b"cookie":
            cookie: SimpleCookie = SimpleCookie()
            cookie.load(value.decode("latin-1"))
            if TOKEN_COOKIE in cookie:
                return str(cookie[TOKEN_COOKIE].value)
    return None


def token_guard(app: Any, token: str | None) -> ASGIApp:
    """Wrap `app` so that every path but the open ones needs the API token (when one is set)."""
    if not token:
        return app  # type: ignore[no-any-return]
    expected = token.encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(OPEN_PATHS):
            await app(scope, receive, send)
            return
        presented = _presented_token(scope)
        if presented is not None and hmac.compare_digest(presented.encode(), expected):
            await app(scope, receive, send)
            return
        body = (
            b'{"status_code":401,"detail":"this tracecard needs an API token: send it as '
            b'`Authorization: Bearer <token>` or the `Tracecard-Token` header"}'
        )
        start: dict[str, Any] = {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer"),
            ],
        }
        await send(start)
        await send({"type": "http.response.body", "body": body})

    return guarded
