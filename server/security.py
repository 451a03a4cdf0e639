"""API token check and response headers, as raw ASGI middleware (cheap on the proxy path)."""

from __future__ import annotations

import hmac
import html
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from tracecard.server.asgi import ASGIApp, Receive, Scope, Send, send_bytes

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


_LOGIN_CSP = b"default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"


def _login_page(message: str = "") -> bytes:
    note = f"<p><strong>{html.escape(message)}</strong></p>" if message else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>tracecard: sign in</title>"
        "</head><body><main><h1>tracecard</h1>"
        "<p>This tracecard needs its API token (<code>api_token</code> in the config or "
        "<code>TRACECARD_API_TOKEN</code>).</p>"
        f"{note}<form method=post action=/login><label>API token "
        "<input type=password name=token autocomplete=current-password required autofocus>"
        "</label> <button type=submit>Sign in</button></form></main></body></html>"
    ).encode()


async def _login(scope: Scope, receive: Receive, send: Send, expected: bytes) -> None:
    """GET: a sign-in form; POST: check the token and keep it in an HttpOnly cookie."""
    html_type = b"text/html; charset=utf-8"
    page = [(b"content-security-policy", _LOGIN_CSP)]
    if scope["method"] != "POST":
        await send_bytes(send, 200, _login_page(), html_type, page)
        return
    body = b""
    while len(body) <= 8192:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    presented = parse_qs(body[:8192].decode("utf-8", errors="replace")).get("token", [""])[0]
    if not hmac.compare_digest(presented.encode(), expected):
        await send_bytes(
            send, 401, _login_page("That is not this server's API token."), html_type, page
        )
        return
    cookie = f"{TOKEN_COOKIE}={presented}; Path=/; HttpOnly; SameSite=Strict".encode()
    await send_bytes(send, 303, b"", None, [(b"location", b"/"), (b"set-cookie", cookie)])


def _wants_html(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"accept":
            return b"text/html" in value
    return False


def token_guard(app: Any, token: str | None) -> ASGIApp:
    """Wrap `app` so that every path but the open ones needs the API token (when one is set)."""
    if not token:
        return app  # type: ignore[no-any-return]
    expected = token.encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/login":
            await _login(scope, receive, send, expected)
            return
        if scope["type"] != "http" or scope["path"].startswith(OPEN_PATHS):
            await app(scope, receive, send)
            return
        presented = _presented_token(scope)
        if presented is not None and hmac.compare_digest(presented.encode(), expected):
            await app(scope, receive, send)
            return
        if _wants_html(scope) and scope["method"] == "GET":
            await send_bytes(send, 303, b"", None, [(b"location", b"/login")])
            return
        body = (
            b'{"status_code":401,"detail":"this tracecard needs an API token: send it as '
            b'`Authorization: Bearer <token>` or the `Tracecard-Token` header"}'
        )
        await send_bytes(send, 401, body, headers=[(b"www-authenticate", b"Bearer")])

    return guarded
