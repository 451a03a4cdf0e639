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
    TOKEN_HEADER,
    cookie_token_matches,
    has_cookie,
    without_own_credentials,
)
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


# What the guard reads of a header, by name (one dict lookup a header; every other name is
# passed over). The viewer's CSRF header is looked up beside these (`_CSRF`).
_HOST, _ORIGIN, _SITE, _MODE, _MEDIA, _LENGTH, _CHUNKED, _TOKEN, _BEARER, _COOKIE, _CSRF = range(11)
_CREDENTIALS: Final = frozenset({TOKEN_HEADER, b"authorization", b"cookie"})
_READ: Final = {
    b"host": _HOST,
    b"origin": _ORIGIN,
    b"sec-fetch-site": _SITE,
    b"sec-fetch-mode": _MODE,
    b"content-type": _MEDIA,
    b"content-length": _LENGTH,
    b"transfer-encoding": _CHUNKED,
    TOKEN_HEADER: _TOKEN,
    b"authorization": _BEARER,
    b"cookie": _COOKIE,
}


@dataclass(slots=True)
class _Request:
    """The headers the guard reads, from one pass over the ASGI headers."""

    host: str = ""
    origin: str | None = None
    fetch_site: str = ""
    fetch_mode: str = ""
    media: str | None = None
    has_body: bool = False
    header_token: list[str] | None = None
    cookie: str | None = None
    csrf_header: str | None = None
    credentials: bool = False  # a token header, an Authorization or a Cookie: may hold ours

    @classmethod
    def scan(cls, raw: list[tuple[bytes, bytes]], read: dict[bytes, int], form: bytes) -> _Request:
        """`read`: `_READ` with the viewer's CSRF header `form` added (`SecurityGuard._read`)."""
        named = dict(raw)
        if len(named) != len(raw) or _CREDENTIALS.intersection(named):
            return cls.scan_each(raw, read)  # a name given twice, or one that may hold a token
        # every name once and no credential (the usual proxied request): looked up
        host, origin = named.get(b"host"), named.get(b"origin")
        site, mode = named.get(b"sec-fetch-site"), named.get(b"sec-fetch-mode")
        media, length = named.get(b"content-type"), named.get(b"content-length")
        csrf = named.get(form)
        return cls(
            host=host.decode("latin-1") if host is not None else "",
            origin=origin.decode("latin-1") if origin is not None else None,
            fetch_site=site.decode("latin-1").lower() if site is not None else "",
            fetch_mode=mode.decode("latin-1").lower() if mode is not None else "",
            media=(
                media.decode("latin-1").split(";", 1)[0].strip().lower()
                if media is not None
                else None
            ),
            has_body=(length is not None and length.strip() not in (b"", b"0"))
            or b"transfer-encoding" in named,
            csrf_header=csrf.decode("latin-1") if csrf is not None else None,
        )

    @classmethod
    def scan_each(cls, raw: list[tuple[bytes, bytes]], read: dict[bytes, int]) -> _Request:
        """`scan` one header at a time (a name given twice, credentials)."""
        found = cls()
        for name, value in raw:
            kind = read.get(name)
            if kind is None:
                continue
            if kind == _HOST:
                found.host = value.decode("latin-1")
            elif kind == _MEDIA:
                found.media = value.decode("latin-1").split(";", 1)[0].strip().lower()
            elif kind == _LENGTH:
                found.has_body = found.has_body or value.strip() not in (b"", b"0")
            elif kind == _ORIGIN:
                found.origin = value.decode("latin-1")
            elif kind == _SITE:
                found.fetch_site = value.decode("latin-1").lower()
            elif kind == _MODE:
                found.fetch_mode = value.decode("latin-1").lower()
            elif kind == _CHUNKED:
                found.has_body = True
            elif kind == _TOKEN or kind == _BEARER:
                found.credentials = True
                if kind == _TOKEN or value[:7].lower() == b"bearer ":
                    presented = value if kind == _TOKEN else value[7:]
                    found.header_token = [*(found.header_token or []), presented.decode("latin-1")]
            elif kind == _COOKIE:
                found.credentials = True
                found.cookie = value.decode("latin-1")
            else:  # _CSRF
                found.csrf_header = value.decode("latin-1")
        return found


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
        self._read = {**_READ, self._form: _CSRF}
        self._own_cookies = frozenset({TOKEN_COOKIE, forms.cookie})
        self._hosts_seen: set[str] = set()  # Host values that passed (`_check_host`), bounded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            passed = self._check_proxied(scope, receive)
            if passed is None:
                passed = await self._check(scope, receive, send)
        except Refused as refused:
            body = orjson.dumps({"status_code": refused.status, "detail": refused.detail})
            await send_bytes(send, refused.status, body, headers=refused.headers)
            return
        if passed is not None:
            await self.app(scope, passed, send)

    def _check_proxied(self, scope: Scope, receive: Receive) -> Receive | None:
        """The proxy's usual request (MCP or a plain HTTP tool, no API token configured) checked
        without a coroutine of its own: the checks `_check` makes, in its order. None: any other
        request, for `_check`."""
        if self.policy.token is not None:
            return None
        path: str = scope["path"]
        route = route_of(path, scope)
        if route is not Route.MCP and route is not Route.HTTP_TOOL:
            return None
        request = _Request.scan(scope.get("headers", []), self._read, self._form)
        method: str = scope["method"]
        self._check_host(request)
        self._check_origin(request, method)
        _check_media(request, method, route, path)
        if request.credentials:
            scope["headers"] = without_own_credentials(scope["headers"], None, self._own_cookies)
        return receive

    async def _check(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """The receive to hand on (replaying a body read here); None when answered here."""
        request = _Request.scan(scope.get("headers", []), self._read, self._form)
        method: str = scope["method"]
        path: str = scope["path"]
        route = route_of(path, scope)
        self._check_host(request)
        self._check_origin(request, method)
        policy = self.policy
        if policy.token is not None:
            if path == "/login":
                await login(scope, receive, send, policy.token)
                return None
            if route is not Route.OPEN and not self._signed_in(request, method, route):
                if method == "GET" and b"text/html" in _header(scope, b"accept"):
                    await send_bytes(send, 303, b"", None, [(b"location", b"/login")])
                    return None
                raise _unauthorised(request, method)
        _check_media(request, method, route, path)
        if route is Route.VIEWER and method not in SAFE_METHODS:
            return await self._check_csrf(request, receive)
        if route in (Route.MCP, Route.HTTP_TOOL) and request.credentials:
            scope["headers"] = without_own_credentials(
                scope["headers"], policy.token, self._own_cookies
            )
        return receive

    def _check_host(self, request: _Request) -> None:
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

    def _check_origin(self, request: _Request, method: str) -> None:
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

    def _signed_in(self, request: _Request, method: str, route: Route) -> bool:
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

    async def _check_csrf(self, request: _Request, receive: Receive) -> Receive:
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


def _check_media(request: _Request, method: str, route: Route, path: str) -> None:
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


def _unauthorised(request: _Request, method: str) -> Refused:
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
