"""The request headers the security guard reads (server/security.py), read in one pass.

A request whose header names each come once and carry no credential (the proxy's usual one) is
read by one `dict` of the headers and a dozen lookups; any other, one header at a time. Both
give the same `GuardRequest` (tests/server/test_security.py checks it on random header lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tracecard.server.credentials import TOKEN_HEADER

# What the guard reads of a header, by name (one dict lookup a header; every other name is
# passed over). The viewer's CSRF header is looked up beside these (`CSRF`).
_HOST, _ORIGIN, _SITE, _MODE, _MEDIA, _LENGTH, _CHUNKED, _TOKEN, _BEARER, _COOKIE, CSRF = range(11)
_CREDENTIALS: Final = frozenset({TOKEN_HEADER, b"authorization", b"cookie"})
READ: Final = {
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
class GuardRequest:
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
    def scan(
        cls, raw: list[tuple[bytes, bytes]], read: dict[bytes, int], form: bytes
    ) -> GuardRequest:
        """`read`: `READ` with the viewer's CSRF header `form` added (`SecurityGuard._read`)."""
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
    def scan_each(cls, raw: list[tuple[bytes, bytes]], read: dict[bytes, int]) -> GuardRequest:
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
            else:  # CSRF
                found.csrf_header = value.decode("latin-1")
        return found
