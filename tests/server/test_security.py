"""The security guard as raw ASGI, around an app that records what reached it.

The real server, the real proxy and a real browser are in test_security_browser.py; here each
rule is tried on its own: Host (DNS rebinding), Origin and Sec-Fetch-Site, content types, the
token's header-only rule for the API, the viewer's CSRF token, and what a proxied request loses.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.processes import mcp_tool_server
from tests.support.proxy import MCP_HEADERS, rpc, tracecard_for
from tracecard.server.guard_request import CSRF, READ, GuardRequest
from tracecard.server.security import SecurityGuard, host_name
from tracecard.server.settings import Settings
from tracecard.viewer import csrf

KEY = b"k" * 32
NONCE = "ab" * 16
TOKEN = "s3cret"


@dataclass
class Reached:
    """What the wrapped app saw of each request that got through."""

    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)


def guard(**settings: Any) -> tuple[SecurityGuard, Reached]:
    reached = Reached()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        reached.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        reached.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return SecurityGuard(app, Settings(**settings), csrf.FormTokens(key=lambda: KEY)), reached


def call(
    app: SecurityGuard, method: str, path: str, body: bytes = b"", **headers: str
) -> tuple[int, dict[str, Any] | None, dict[str, str]]:
    """(status, JSON body when the guard answered, response headers)."""
    raw = [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    if not any(k == b"host" for k, _ in raw):
        raw.append((b"host", b"127.0.0.1:7800"))
    if body:
        raw.append((b"content-length", str(len(body)).encode()))
    scope = {"type": "http", "method": method, "path": path, "headers": raw, "query_string": b""}
    chunks = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = sent[0]["status"]
    response_headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    payload = sent[1].get("body", b"")
    answered = orjson.loads(payload) if payload.startswith(b"{") else None
    return status, answered, response_headers


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:7800", 200),
        ("localhost:1234", 200),
        ("LOCALHOST", 200),
        ("[::1]:7800", 200),
        ("evil.example:7800", 403),
        ("evil.example", 403),
        ("127.0.0.1.evil.example:7800", 403),
        ("localhost.:7800", 403),
        ("[::2]:7800", 403),
    ],
)
def test_only_loopback_names_reach_a_loopback_server(host: str, status: int) -> None:
    app, reached = guard()
    for method, path in [("GET", "/api/runs/x/spans"), ("GET", "/runs/x"), ("GET", "/healthz")]:
        answer, body, _ = call(app, method, path, host=host)
        assert answer == status, (host, path)
        if status == 403:
            assert body is not None and "DNS rebinding" in body["detail"]
            assert "allowed_hosts" in body["detail"]
    assert len(reached.headers) == (3 if status == 200 else 0)


def test_every_route_checks_the_host_the_proxy_too() -> None:
    app, reached = guard()
    json = {"content_type": "application/json"}
    for path in ["/mcp/tools", "/runs/r1/mcp/tools", "/http/api/x", "/v1/traces", "/api/runs"]:
        assert call(app, "POST", path, b"{}", host="evil.example.com", **json)[0] == 403, path
    assert reached.headers == []


def test_configured_names_and_public_url_are_allowed() -> None:
    app, _ = guard(allowed_hosts=["tracecard.lan", "::5"], public_url="https://tc.example/x")
    for host in ["tracecard.lan:80", "TRACECARD.LAN", "[::5]:7800", "tc.example", "localhost"]:
        assert call(app, "GET", "/runs", host=host)[0] == 200, host
    assert call(app, "GET", "/runs", host="other.lan")[0] == 403


def test_host_check_off_beyond_loopback_unless_names_are_configured() -> None:
    anywhere, _ = guard(host="0.0.0.0", api_token=TOKEN)
    assert call(anywhere, "GET", "/api/runs", host="10.0.0.5:7800", tracecard_token=TOKEN)[0] == 200
    named, _ = guard(host="0.0.0.0", api_token=TOKEN, allowed_hosts=["tc.lan"])
    assert call(named, "GET", "/api/runs", host="10.0.0.5", tracecard_token=TOKEN)[0] == 403
    public, _ = guard(host="0.0.0.0", api_token=TOKEN, public_url="https://tc.example")
    assert call(public, "GET", "/api/runs", host="10.0.0.5", tracecard_token=TOKEN)[0] == 200
    off, _ = guard(allowed_hosts=["*"])
    assert call(off, "GET", "/api/runs", host="anything.example")[0] == 200


def test_headers_read_at_once_or_one_by_one_agree() -> None:
    """The guard reads a request whose names come once and carry no credential by lookups,
    any other one header at a time: both read the same, on random header lists."""
    read = {**READ, b"x-csrf-token": CSRF}
    names = [
        *(b"host origin sec-fetch-site sec-fetch-mode content-type content-length".split()),
        *(b"transfer-encoding tracecard-token authorization cookie x-csrf-token accept".split()),
    ]
    values = [b"1", b"0", b"", b" 0 ", b"Application/JSON; charset=utf-8", b"Cross-Site"]
    values += [b"bearer abc", b"Bearer xyz", b"a=b; c=d", b"localhost:8000", b"\xe9"]
    rng = random.Random(11)
    for case in range(4000):
        if case % 2:
            raw = [(name, rng.choice(values)) for name in rng.sample(names, rng.randint(0, 10))]
        else:
            raw = [(rng.choice(names), rng.choice(values)) for _ in range(rng.randint(0, 10))]
        assert GuardRequest.scan(raw, read, b"x-csrf-token") == GuardRequest.scan_each(raw, read), (
            raw
        )


def test_host_name_parsing() -> None:
    assert host_name("[::1]:7800") == "::1"
    assert host_name("Example.COM:80") == "example.com"
    assert host_name("example.com") == "example.com"
    assert host_name("::1") == "::1"


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://127.0.0.1:7800", 200),  # tracecard's own page
        ("http://127.0.0.1:8000", 403),  # another port on the same machine
        ("http://127.0.0.2:7800", 403),
        ("https://evil.example", 403),
        ("null", 403),  # sandboxed frames, file: pages
    ],
)
def test_requests_from_other_origins_are_refused(origin: str, status: int) -> None:
    app, reached = guard()
    json = {"content_type": "application/json"}
    for method, path in [("POST", "/api/runs"), ("POST", "/mcp/tools"), ("GET", "/api/runs/x")]:
        answer, body, _ = call(app, method, path, b"{}", origin=origin, **json)
        assert answer == status, (origin, method, path)
        if status == 403:
            assert body is not None and "allowed_origins" in body["detail"]
    assert len(reached.bodies) == (3 if status == 200 else 0)


def test_configured_origins_are_allowed() -> None:
    app, _ = guard(allowed_origins=["http://localhost:6274"])
    headers = {"origin": "http://localhost:6274", "sec_fetch_site": "same-site"}
    assert call(app, "POST", "/mcp/t", b"{}", content_type="application/json", **headers)[0] == 200


@pytest.mark.parametrize(
    ("site", "mode", "method", "status"),
    [
        ("same-origin", "cors", "POST", 200),
        ("none", "navigate", "GET", 200),  # typed into the address bar
        ("cross-site", "navigate", "GET", 200),  # a link in a pull request to a trace page
        ("cross-site", "no-cors", "GET", 403),  # <img src=...> or <script src=...>
        ("cross-site", "navigate", "POST", 403),  # a form posted from another site
        ("same-site", "no-cors", "POST", 403),  # another port on localhost
    ],
)
def test_fetch_metadata(site: str, mode: str, method: str, status: int) -> None:
    app, _ = guard()
    headers = {"sec_fetch_site": site, "sec_fetch_mode": mode}
    body = b"{}" if method == "POST" else b""
    json = {"content_type": "application/json"} if body else {}
    assert call(app, method, "/api/runs", body, **headers, **json)[0] == status


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs",
        "/api/suites",
        "/api/experiments",
        "/api/runs/r1/finish",
        "/api/runs/r1/verdicts",
        "/mcp/tools",
        "/runs/r1/mcp/tools",
        "/http/api/write",
        "/runs/r1/http/api/write",
    ],
)
@pytest.mark.parametrize(
    "media", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded"]
)
def test_bodies_a_page_can_send_unasked_are_refused(path: str, media: str) -> None:
    app, reached = guard()
    status, body, _ = call(app, "POST", path, b'{"jsonrpc":"2.0"}', content_type=media)
    assert status == 415 and body is not None and "Content-Type" in body["detail"]
    assert reached.bodies == []  # nothing stored, nothing forwarded


def test_the_types_each_route_takes() -> None:
    app, reached = guard()
    accepted = [
        ("/api/runs", "application/json"),
        ("/api/runs", "application/json; charset=utf-8"),
        ("/api/suites", "application/toml"),
        ("/api/experiments", "application/vnd.api+json"),
        ("/mcp/tools", "application/json"),
        ("/http/api/x", "application/json"),
        ("/http/api/x", "application/xml"),
    ]
    for path, media in accepted:
        assert call(app, "POST", path, b"{}", content_type=media)[0] == 200, (path, media)
    assert call(app, "POST", "/api/runs/r1/rescore")[0] == 200  # no body, no type
    assert call(app, "POST", "/api/runs", b"{}")[0] == 415  # a body without a type
    assert call(app, "POST", "/mcp/tools", b"{}")[0] == 415
    assert call(app, "POST", "/api/runs", b"x", content_type="application/toml")[0] == 415
    assert call(app, "GET", "/mcp/tools")[0] == 200 and call(app, "DELETE", "/mcp/tools")[0] == 200
    assert len(reached.bodies) == len(accepted) + 3


def test_with_a_token_the_cookie_opens_pages_but_not_the_api() -> None:
    app, reached = guard(api_token=TOKEN)
    cookie = {"cookie": f"tracecard_token={TOKEN}"}
    json = {"content_type": "application/json"}
    assert call(app, "GET", "/api/runs/x/spans", **cookie)[0] == 200
    assert call(app, "GET", "/runs/x", **cookie)[0] == 200
    for path in ["/api/runs", "/mcp/tools", "/http/api/x", "/v1/traces"]:
        status, body, headers = call(app, "POST", path, b"{}", **cookie, **json)
        assert status == 401 and "sign-in cookie opens the viewer only" in body["detail"], path
        assert headers["www-authenticate"] == "Bearer"
    assert call(app, "POST", "/api/runs", b"{}", authorization=f"Bearer {TOKEN}", **json)[0] == 200
    assert call(app, "POST", "/api/runs", b"{}", tracecard_token=TOKEN, **json)[0] == 200
    assert call(app, "POST", "/api/runs", b"{}", tracecard_token="guess", **json)[0] == 401
    assert call(app, "GET", "/api/runs/x")[0] == 401
    assert call(app, "GET", "/runs", accept="text/html")[0] == 303  # to the sign-in page
    assert call(app, "GET", "/healthz")[0] == 200
    assert len(reached.bodies) == 5


def form(token: str, **fields: str) -> bytes:
    pairs = {"component": "outcome", "agree": "yes", **fields, "csrf_token": token}
    return "&".join(f"{k}={v}" for k, v in pairs.items()).encode()


def test_viewer_forms_need_the_csrf_token_of_the_browsers_cookie() -> None:
    app, reached = guard()
    good = csrf.token_for(KEY, NONCE)
    cookie = f"{csrf.COOKIE}={NONCE}"
    urlencoded = "application/x-www-form-urlencoded"
    status, _, _ = call(
        app, "POST", "/runs/r1/verdicts", form(good), cookie=cookie, content_type=urlencoded
    )
    assert status == 200 and reached.bodies == [form(good)]  # the body reaches the handler whole
    refused = [
        call(app, "POST", "/runs/r1/verdicts", form(good), content_type=urlencoded),  # no cookie
        call(
            app, "POST", "/runs/r1/verdicts", form("0" * 64), cookie=cookie, content_type=urlencoded
        ),
        # a cookie planted by a page on another port (cookies ignore ports), with no valid token
        call(
            app,
            "POST",
            "/runs/r1/verdicts",
            form(csrf.token_for(b"x" * 32, "planted")),
            cookie=f"{csrf.COOKIE}=planted",
            content_type=urlencoded,
        ),
        call(
            app, "POST", "/runs/r1/verdicts", b"agree=yes", cookie=cookie, content_type=urlencoded
        ),
    ]
    for status, body, _ in refused:
        assert status == 403 and body is not None and "reload the page" in body["detail"]
    assert call(app, "POST", "/runs/r1/verdicts", b"", cookie=cookie, x_csrf_token=good)[0] == 200
    assert len(reached.bodies) == 2


def test_with_a_token_the_viewer_form_needs_cookie_and_csrf_token() -> None:
    app, reached = guard(api_token=TOKEN)
    good = csrf.token_for(KEY, NONCE)
    both = f"tracecard_token={TOKEN}; {csrf.COOKIE}={NONCE}"
    urlencoded = "application/x-www-form-urlencoded"
    assert (
        call(app, "POST", "/runs/r1/verdicts", form(good), cookie=both, content_type=urlencoded)[0]
        == 200
    )
    only_csrf = f"{csrf.COOKIE}={NONCE}"
    assert (
        call(
            app, "POST", "/runs/r1/verdicts", form(good), cookie=only_csrf, content_type=urlencoded
        )[0]
        == 401
    )
    assert len(reached.bodies) == 1


def test_tracecards_credentials_never_reach_an_upstream() -> None:
    app, reached = guard(api_token=TOKEN)
    json = {"content_type": "application/json"}
    cookies = f"tracecard_token={TOKEN}; theirs=1; {csrf.COOKIE}={NONCE}"
    call(app, "POST", "/mcp/tools", b"{}", authorization=f"Bearer {TOKEN}", cookie=cookies, **json)
    call(
        app, "POST", "/http/api/x", b"{}", tracecard_token=TOKEN, authorization="Bearer up", **json
    )
    call(app, "GET", "/runs/r1/mcp/tools", tracecard_token=TOKEN, cookie=f"tracecard_token={TOKEN}")
    first, second, third = reached.headers
    assert "authorization" not in first and first["cookie"] == "theirs=1"
    assert "tracecard-token" not in second and second["authorization"] == "Bearer up"
    assert "tracecard-token" not in third and "cookie" not in third
    assert all(TOKEN not in str(headers) for headers in reached.headers)


def test_without_a_token_the_agents_own_authorization_is_forwarded() -> None:
    app, reached = guard()
    json = {"content_type": "application/json"}
    call(app, "POST", "/mcp/tools", b"{}", authorization="Bearer upstream-key", **json)
    assert reached.headers[0]["authorization"] == "Bearer upstream-key"


def test_the_conformance_rebinding_check_passes_through_tracecard(tmp_path: Path) -> None:
    """The MCP conformance `dns-rebinding-protection` requests, direct and through tracecard.

    The upstream is the SDK's own server, which guards its Host and Origin itself: both ways,
    `Host`/`Origin: evil.example.com` is 4xx and the server's own name is 2xx. The upstream
    never sees the agent's Host (it gets its own), so a Host-only rebind is tracecard's to stop.
    """
    initialize = rpc(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}},
    )

    def post(url: str, host: str, origin: bool = True) -> int:
        headers = {**MCP_HEADERS, "host": host, **({"origin": f"http://{host}"} if origin else {})}
        return httpx.post(url, json=initialize, headers=headers, timeout=10).status_code

    with mcp_tool_server() as upstream, tracecard_for({"tools": {"url": upstream}}, tmp_path) as tc:
        for url in [upstream, f"{tc.url}/mcp/tools"]:
            own = url.removeprefix("http://").split("/", 1)[0]
            assert 400 <= post(url, "evil.example.com") < 500, url
            assert 400 <= post(url, "evil.example.com", origin=False) < 500, url
            assert 200 <= post(url, own) < 300, url


def test_forwarded_headers_are_believed_only_from_configured_proxies() -> None:
    """uvicorn runs its X-Forwarded-* middleware on every request only when `trusted_proxies`
    names a reverse proxy (#24 item 2); by default a client's address is where it connected
    from, whatever X-Forwarded-For it sends."""
    from uvicorn.config import Config
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from tracecard.server.serving import server_options

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    plain = Config(app, **server_options(Settings()))
    plain.load()
    assert not isinstance(plain.loaded_app, ProxyHeadersMiddleware)
    behind = Config(app, **server_options(Settings(trusted_proxies=["10.0.0.1"])))
    behind.load()
    assert isinstance(behind.loaded_app, ProxyHeadersMiddleware)
    assert behind.forwarded_allow_ips == ["10.0.0.1"]
