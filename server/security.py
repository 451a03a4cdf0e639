"""Who may reach tracecard: raw ASGI middleware in front of every route (cheap on the proxy path).

For every HTTP request, in this order (docs/configuration.md, "Who can reach tracecard"):
1. Host: bound to loopback (or with `allowed_hosts`), the Host must be localhost, 127.0.0.1,
   [::1], public_url's name or a configured name, any port. A web page that rebinds its own name
   to 127.0.0.1 sends its own name and is refused (DNS rebinding).
2. Origin: a browser request that names another origin is refused, and so is one that
   `Sec-Fetch-Site` marks cross-site or same-site (another port), except a plain navigation.
3. With `api_token`: the token in a header; the login cookie only opens GET pages and the
   viewer's forms (a form post from elsewhere would carry the cookie, so the forms need 5.).
4. Content type: the JSON API and the MCP proxy take JSON only; a plain HTTP tool never gets
   a body type that a page on another site can send without asking (text/plain, forms).
5. The viewer's state-changing requests carry its forms' CSRF token (`FormTokens`).
6. Proxied requests lose tracecard's own credentials before they go on to an upstream.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Protocol
from urllib.parse import parse_qs, urlsplit

import orjson

from tracecard.server.asgi import (
    BodyTooLarge,
    ClientGone,
    Receive,
    Scope,
    Send,
    read_body,
    send_bytes,
)
from tracecard.server.credentials import (
    cookie_token_matches,
    has_cookie,
    without_own_credentials,
)
from tracecard.server.guard_request import CSRF, READ, GuardRequest
from tracecard.server.login import TOKEN_COOKIE, login
from tracecard.server.proxy.routing import ROUTE_KEY, match
from tracecard.server.settings import LOOPBACK, Settings

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
OPEN_PATHS: Final = ("/healthz", "/static/", "/login")  # no token needed
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
# The body types a page may send to any site without a CORS preflight (Fetch, CORS-safelisted).
_SIMPLE_TYPES: Final = frozenset(
    {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}
)
_FORM: Final = "application/x-www-form-urlencoded"
_HOSTS_SEEN_MAX: Final = 256  # Host values remembered as allowed (names x ports seen)
_FORM_LIMIT: Final = 64 * 1024  # a viewer form (a verdict note is at most 4,000 characters)


class FormTokens(Protocol):
    """The viewer's CSRF tokens (`tracecard.viewer.csrf.FormTokens`, wired by the app factory)."""

    @property
    def cookie(self) -> str: ...  # the browser's nonce cookie
    @property
    def field(self) -> str: ...  # the form field that carries the token
    @property
    def header(self) -> str: ...  # or the request header

    def valid(self, cookie_header: str | None, token: str | None) -> bool:
        """Whether `token` belongs to the nonce in this request's cookies."""
        ...


class Route(Enum):
    MCP = "mcp"  # /mcp/{upstream}, /runs/{id}/mcp/{upstream}
    HTTP_TOOL = "http"  # /http/{upstream}/..., /runs/{id}/http/{upstream}/...
    API = "api"  # /api/...
    OTLP = "otlp"  # /v1/traces (its handler checks protobuf or JSON itself)
    OPEN = "open"  # /healthz, /static/, /login
    VIEWER = "viewer"  # every other page


def route_of(path: str, scope: Scope | None = None) -> Route:
    """Which kind of endpoint a path reaches (with `scope`: the proxy route is left in it for
    the router, under `ROUTE_KEY`)."""
    proxied = match(path)
    if scope is not None:
        scope[ROUTE_KEY] = proxied
    if proxied is not None:
        return Route.MCP if proxied[0] == "mcp" else Route.HTTP_TOOL
    if path.startswith("/api/"):
        return Route.API
    if path.startswith("/v1/"):
        return Route.OTLP
    if path.startswith(OPEN_PATHS):
        return Route.OPEN
    return Route.VIEWER


def host_name(host: str) -> str:
    """The name in a Host header value, without port or IPv6 brackets, lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") > 1:
        return host  # a bare IPv6 address (as written in allowed_hosts)
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def _origin_of(url: str) -> str:
    parts = urlsplit(url.strip().lower())
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True, slots=True)
class Policy:
    """What the guard allows, read once from the settings."""

    hosts: frozenset[str] | None  # names the Host may carry; None: not checked
    origins: frozenset[str]  # origins allowed besides the request's own
    token: bytes | None

    @classmethod
    def of(cls, settings: Settings) -> Policy:
        configured = {host_name(h) for h in settings.allowed_hosts}
        extra_origins = {_origin_of(o) for o in settings.allowed_origins}
        if settings.public_url:
            configured.add(host_name(urlsplit(settings.public_url).netloc))
            extra_origins.add(_origin_of(settings.public_url))
        named = bool(settings.allowed_hosts)  # beyond loopback, only names a person gave
        checked = "*" not in configured and (settings.host in LOOPBACK or named)
        hosts = frozenset(LOOPBACK_NAMES | configured) if checked else None
        token = settings.api_token.encode() if settings.api_token else None
        return cls(hosts, frozenset(extra_origins), token)


class _Step(Enum):
    """What a request needs after the checks, when it is more than passing on."""

    LOGIN = "login"  # /login with a token configured: the sign-in page answers it
    SIGN_IN = "sign_in"  # a page asked for without signing in: redirected to /login
    CSRF = "csrf"  # a viewer form: its CSRF token is checked (the body may be read)


class Refused(Exception):
    """A request the guard answers itself, with a JSON error a person can act on."""

    def __init__(self, status: int, detail: str, *headers: tuple[bytes, bytes]) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = list(headers)


class SecurityGuard:
    """The ASGI app as served: checks every request, then hands it to `app`."""

    def __init__(self, app: Any, settings: Settings, forms: FormTokens) -> None:
        self.app = app
        self.policy = Policy.of(settings)
        self.forms = forms
        self._form = forms.header.lower().encode()
        self._read = {**READ, self._form: CSRF}
        self._own_cookies = frozenset({TOKEN_COOKIE, forms.cookie})
        self._hosts_seen: set[str] = set()  # Host values that passed (`_check_host`), bounded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            request, step = self._check(scope)
            passed: Receive | None = receive
            if step is not None:  # the rarer requests that need a wait (no coroutine otherwise)
                passed = await self._finish(step, request, scope, receive, send)
        except Refused as refused:
            body = orjson.dumps({"status_code": refused.status, "detail": refused.detail})
            await send_bytes(send, refused.status, body, headers=refused.headers)
            return
        if passed is not None:
            await self.app(scope, passed, send)

    def _check(self, scope: Scope) -> tuple[GuardRequest, _Step | None]:
        """Every check that needs no wait, in order; raises `Refused`. The step left to take
        (sign-in page, redirect to it, the viewer's CSRF token), or None to pass on as it is."""
        request = GuardRequest.scan(scope.get("headers", []), self._read, self._form)
        method: str = scope["method"]
        path: str = scope["path"]
        route = route_of(path, scope)
        self._check_host(request)
        self._check_origin(request, method)
        policy = self.policy
        if policy.token is not None:
            if path == "/login":
                return request, _Step.LOGIN
            if route is not Route.OPEN and not self._signed_in(request, method, route):
                if method == "GET" and b"text/html" in _header(scope, b"accept"):
                    return request, _Step.SIGN_IN
                raise _unauthorised(request, method)
        _check_media(request, method, route, path)
        if route is Route.VIEWER and method not in SAFE_METHODS:
            return request, _Step.CSRF
        if route in (Route.MCP, Route.HTTP_TOOL) and request.credentials:
            scope["headers"] = without_own_credentials(
                scope["headers"], policy.token, self._own_cookies
            )
        return request, None

    async def _finish(
        self, step: _Step, request: GuardRequest, scope: Scope, receive: Receive, send: Send
    ) -> Receive | None:
        """The receive to hand on (replaying a body read here); None when answered here."""
        if step is _Step.LOGIN:
            assert self.policy.token is not None
            await login(scope, receive, send, self.policy.token)
            return None
        if step is _Step.SIGN_IN:
            await send_bytes(send, 303, b"", None, [(b"location", b"/login")])
            return None
        return await self._check_csrf(request, receive)

    def _check_host(self, request: GuardRequest) -> None:
        hosts = self.policy.hosts
        if hosts is None or not request.host or request.host in self._hosts_seen:
            return
        if host_name(request.host) in hosts:
            if len(self._hosts_seen) < _HOSTS_SEEN_MAX:
                self._hosts_seen.add(request.host)
            return
        raise Refused(
            403,
            f"Host {request.host!r} is not a name of this tracecard (localhost, 127.0.0.1, "
            "[::1], public_url, allowed_hosts): a web page may be trying DNS rebinding. If you "
            "reach tracecard by this name, add it to allowed_hosts (tracecard.toml) or "
            "TRACECARD_ALLOWED_HOSTS",
        )

    def _check_origin(self, request: GuardRequest, method: str) -> None:
        origin = request.origin
        if origin is not None:
            named = _origin_of(origin)
            if named in self.policy.origins:
                return  # configured: allowed whatever Sec-Fetch-Site says
            own = request.host.strip().lower()
            if origin.strip().lower() == "null" or not own or named.partition("://")[2] != own:
                raise Refused(
                    403,
                    f"a request from the web page at {origin!r} is refused: tracecard answers "
                    "its own pages only. To let a browser app at that origin call tracecard, "
                    "add it to allowed_origins (tracecard.toml)",
                )
        navigation = request.fetch_mode == "navigate" and method in ("GET", "HEAD")
        if request.fetch_site in ("cross-site", "same-site") and not navigation:
            raise Refused(
                403,
                f"a {request.fetch_site} request from another web page is refused "
                "(Sec-Fetch-Site): tracecard answers its own pages only",
            )

    def _signed_in(self, request: GuardRequest, method: str, route: Route) -> bool:
        expected = self.policy.token
        assert expected is not None
        for presented in request.header_token or ():
            if hmac.compare_digest(presented.strip().encode("latin-1"), expected):
                return True
        # The cookie a browser attaches by itself: enough to read, and for the viewer's forms,
        # whose CSRF token is checked next; never for the API, the proxy or OTLP.
        if method not in SAFE_METHODS and route is not Route.VIEWER:
            return False
        return cookie_token_matches(request.cookie, expected)

    async def _check_csrf(self, request: GuardRequest, receive: Receive) -> Receive:
        token = request.csrf_header
        replay = receive
        if token is None and request.media == _FORM:
            try:
                body = await read_body(receive, _FORM_LIMIT)
            except BodyTooLarge as error:
                raise Refused(413, f"a viewer form is at most {_FORM_LIMIT} bytes") from error
            except ClientGone as error:
                raise Refused(400, str(error)) from error
            token = parse_qs(body.decode("utf-8", "replace")).get(self.forms.field, [""])[0]
            replay = _replay(body, receive)
        if not self.forms.valid(request.cookie, token):
            raise Refused(
                403,
                "this form is out of date or did not come from tracecard's own page "
                "(its CSRF token does not match): reload the page and submit it again",
            )
        return replay


def _check_media(request: GuardRequest, method: str, route: Route, path: str) -> None:
    """JSON for the API and MCP; no CORS-safelisted body type for a plain HTTP tool."""
    if method in SAFE_METHODS:
        return
    media = request.media
    if route is Route.MCP and method == "POST":
        if media != "application/json":
            raise _unsupported(path, media, "application/json (MCP streamable HTTP)")
    elif route is Route.API and (request.has_body or media is not None):
        if media is None or not _is_json(media):
            if not (path.rstrip("/") == "/api/suites" and media == "application/toml"):
                accepted = "application/json or application/toml" if "suites" in path else None
                raise _unsupported(path, media, accepted or "application/json")
    elif route is Route.HTTP_TOOL and media in _SIMPLE_TYPES:
        raise _unsupported(path, media, "any type but text/plain and form encodings")


def _is_json(media: str) -> bool:
    return media == "application/json" or (media.startswith("application/") and "+json" in media)


def _unsupported(path: str, media: str | None, accepted: str) -> Refused:
    return Refused(
        415,
        f"{path} does not take a {media or 'body without a Content-Type'}: send Content-Type "
        f"{accepted}. A text/plain or form body is what a web page on another site can send "
        "unasked, so tracecard refuses it",
    )


def _unauthorised(request: GuardRequest, method: str) -> Refused:
    if method not in SAFE_METHODS and has_cookie(request.cookie, TOKEN_COOKIE):
        detail = (
            "the sign-in cookie opens the viewer only: for the API, the proxy and OTLP send the "
            "token as `Authorization: Bearer <token>` or the `Tracecard-Token` header"
        )
    else:
        detail = (
            "this tracecard needs an API token: send it as `Authorization: Bearer <token>` "
            "or the `Tracecard-Token` header"
        )
    return Refused(401, detail, (b"www-authenticate", b"Bearer"))


def _header(scope: Scope, wanted: bytes) -> bytes:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return bytes(value)
    return b""


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the already-read body once, then defers to the client's."""
    pending = [body]

    async def replayed() -> dict[str, Any]:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replayed
