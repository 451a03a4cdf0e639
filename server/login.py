"""The sign-in page of a token-protected tracecard: the token goes into an HttpOnly cookie."""

from __future__ import annotations

import hmac
import html
from typing import Final
from urllib.parse import parse_qs

from tracecard.server.asgi import Receive, Scope, Send, send_bytes

TOKEN_COOKIE: Final = "tracecard_token"
_LOGIN_CSP: Final = (
    b"default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HTML: Final = b"text/html; charset=utf-8"
_PAGE_HEADERS: Final = [(b"content-security-policy", _LOGIN_CSP)]


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


async def login(scope: Scope, receive: Receive, send: Send, expected: bytes) -> None:
    """GET: a sign-in form; POST: check the token and keep it in an HttpOnly cookie."""
    if scope["method"] != "POST":
        await send_bytes(send, 200, _login_page(), _HTML, _PAGE_HEADERS)
        return
    body = b""
    while len(body) <= 8192:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    presented = parse_qs(body[:8192].decode("utf-8", errors="replace")).get("token", [""])[0]
    if not hmac.compare_digest(presented.encode(), expected):
        page = _login_page("That is not this server's API token.")
        await send_bytes(send, 401, page, _HTML, _PAGE_HEADERS)
        return
    cookie = f"{TOKEN_COOKIE}={presented}; Path=/; HttpOnly; SameSite=Strict".encode()
    await send_bytes(send, 303, b"", None, [(b"location", b"/"), (b"set-cookie", cookie)])
