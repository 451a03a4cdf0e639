"""What crosses the proxy unchanged and what does not: headers both ways, the body limit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import itemgetter, not_
from typing import TYPE_CHECKING
from urllib.parse import quote

from yarl import URL

from tracecard.server.asgi import Scope
from tracecard.server.proxy.errors import ProxyError
from tracecard.server.proxy.transport import UpstreamClient, UpstreamResponse
from tracecard.server.recording.recorder import is_verifier
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.proxy.state import Upstream

# RFC 9110 7.6.1 hop-by-hop headers; Host is rewritten, Content-Length recomputed, and the
# tracecard token is tracecard's own credential, never handed to an upstream.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-connection",
    }
)
# uvicorn writes a Date on every response: the upstream's would make two.
_DROP_RESPONSE = _HOP_BY_HOP | {b"date"}
_DROP_REQUEST = _HOP_BY_HOP | {
    b"proxy-authorization",
    b"host",
    b"content-length",
    b"tracecard-token",
    b"tracecard-verifier",
}


@dataclass(slots=True)
class RequestHeaders:
    """The agent's headers to forward, and the few values the proxy itself reads."""

    forward: list[tuple[str, str]] = field(default_factory=list)
    session_id: str | None = None
    protocol_version: str | None = None
    run_id: str | None = None
    baggage: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    content_length: int | None = None
    accept: str = ""
    user_agent: str = ""
    role: str = semconv.ROLE_AGENT  # `verifier` only with the server's own verifier key
    role_header: str | None = None  # a client's `Tracecard-Role`: recorded, never trusted

    @property
    def trace_headers(self) -> dict[str, str]:
        """The W3C trace-context headers, for continuing the agent's trace."""
        found: dict[str, str] = {}
        if self.traceparent:
            found["traceparent"] = self.traceparent
            if self.tracestate:
                found["tracestate"] = self.tracestate
        return found


# What `scan_request_headers` does with a header, by name: dropped (and maybe read), or read
# and forwarded; any other name is forwarded as it is.
_LENGTH_IN, _CONNECTION, _VERIFIER, _DROPPED = -1, -2, -3, -4
_SESSION, _VERSION, _ACCEPT, _AGENT, _RUN, _BAGGAGE, _PARENT, _STATE, _ROLE = range(1, 10)
_REQUEST_KINDS: dict[bytes, int] = {
    **{name: _DROPPED for name in _DROP_REQUEST},
    b"content-length": _LENGTH_IN,
    b"connection": _CONNECTION,
    b"tracecard-verifier": _VERIFIER,
    b"mcp-session-id": _SESSION,
    b"mcp-protocol-version": _VERSION,
    b"accept": _ACCEPT,
    b"user-agent": _AGENT,
    b"tracecard-run": _RUN,
    b"baggage": _BAGGAGE,
    b"traceparent": _PARENT,
    b"tracestate": _STATE,
    b"tracecard-role": _ROLE,
}


def scan_request_headers(raw: list[tuple[bytes, bytes]], verifier_key: str = "") -> RequestHeaders:
    """What to forward of the ASGI headers, and what tracecard needs to know of them.

    The role is `verifier` only when `Tracecard-Verifier` carries `verifier_key` (that header is
    never forwarded); a client's `Tracecard-Role` is kept in `role_header` and changes nothing.
    """
    named = dict(raw)
    if len(named) != len(raw) or b"connection" in named or b"tracecard-verifier" in named:
        return _scan_each(raw, verifier_key)  # a name given twice, or one read specially
    # every name once (the usual request): the values tracecard reads are looked up, and the
    # rest goes on in the order received, names and values as text
    length = named.get(b"content-length")
    run_id = named.get(b"tracecard-run")
    role_header = named.get(b"tracecard-role")
    kept = _without(raw, _DROP_REQUEST, lowered=True)
    return RequestHeaders(
        forward=list(zip(_texts(map(_NAME, kept)), _texts(map(_VALUE, kept)), strict=True)),
        session_id=_text_of(named.get(b"mcp-session-id")),
        protocol_version=_text_of(named.get(b"mcp-protocol-version")),
        run_id=run_id.decode("latin-1").strip() if run_id is not None else None,
        baggage=_text_of(named.get(b"baggage")),
        traceparent=_text_of(named.get(b"traceparent")),
        tracestate=_text_of(named.get(b"tracestate")),
        content_length=int(length) if length is not None and length.isdigit() else None,
        accept=named.get(b"accept", b"").decode("latin-1"),
        user_agent=named.get(b"user-agent", b"").decode("latin-1"),
        role_header=role_header.decode("latin-1")[:64] if role_header is not None else None,
    )


def _text_of(value: bytes | None) -> str | None:
    return value.decode("latin-1") if value is not None else None


def _scan_each(raw: list[tuple[bytes, bytes]], verifier_key: str) -> RequestHeaders:
    """`scan_request_headers` one header at a time: names given more than once (the last
    value is read, every one forwarded), `Connection`, `Tracecard-Verifier`."""
    found = RequestHeaders()
    forward = found.forward
    connection_listed: set[bytes] | None = None
    kinds = _REQUEST_KINDS
    for name, value in raw:
        kind = kinds.get(name)
        if kind is None:
            forward.append((name.decode("latin-1"), value.decode("latin-1")))
            continue
        if kind < 0:  # not forwarded
            if kind == _LENGTH_IN:
                if value.isdigit():
                    found.content_length = int(value)
            elif kind == _CONNECTION:
                if connection_listed is None:
                    connection_listed = set()
                connection_listed.update(t.strip().lower() for t in value.split(b","))
            elif kind == _VERIFIER and is_verifier(value.decode("latin-1"), verifier_key):
                found.role = semconv.ROLE_VERIFIER
            continue
        text = value.decode("latin-1")
        if kind == _SESSION:
            found.session_id = text
        elif kind == _VERSION:
            found.protocol_version = text
        elif kind == _ACCEPT:
            found.accept = text
        elif kind == _AGENT:
            found.user_agent = text
        elif kind == _RUN:
            found.run_id = text.strip()
        elif kind == _BAGGAGE:
            found.baggage = text
        elif kind == _PARENT:
            found.traceparent = text
        elif kind == _STATE:
            found.tracestate = text
        else:  # _ROLE
            found.role_header = text[:64]
        forward.append((name.decode("latin-1"), text))
    if connection_listed and connection_listed - {b"keep-alive", b"close"}:
        found.forward = [(n, v) for n, v in forward if n.lower().encode() not in connection_listed]
    return found


def response_headers(
    raw: tuple[tuple[bytes, bytes], ...], length: int | None = None
) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers without hop-by-hop ones, in one pass; with `length`,
    Content-Length is that (a body read whole), else the upstream's is kept."""
    if length is None:
        return _without(raw, _DROP_RESPONSE)
    kept = _without(raw, _DROP_STREAM)
    kept.append((_LENGTH, b"%d" % length))
    return kept


_LENGTH = b"content-length"
_DROP_STREAM = _DROP_RESPONSE | {_LENGTH}


def stream_headers(raw: tuple[tuple[bytes, bytes], ...]) -> list[tuple[bytes, bytes]]:
    """The head of a streamed answer: the upstream's headers without hop-by-hop ones and
    without Content-Length (tracecard may add events of its own), in one pass."""
    return _without(raw, _DROP_STREAM)


# Header lists are filtered and decoded by C iterators (map, compress, zip): no Python step
# per header on the proxy's path (a comprehension costs ~15 bytecodes a header).
_NAME, _VALUE = itemgetter(0), itemgetter(1)


def _without(
    raw: Iterable[tuple[bytes, bytes]], drop: frozenset[bytes], lowered: bool = False
) -> list[tuple[bytes, bytes]]:
    """The pairs of `raw` whose name (lower-cased, unless `lowered` says it is) is not in
    `drop`, in order."""
    pairs = raw if isinstance(raw, list | tuple) else list(raw)
    names = map(_NAME, pairs) if lowered else map(bytes.lower, map(_NAME, pairs))
    return list(compress(pairs, map(not_, map(drop.__contains__, names))))


def _texts(items: Iterable[bytes]) -> Iterator[str]:
    """Header bytes as text (latin-1: every byte is one character, as ASGI servers give it)."""
    return map(bytes.decode, items, repeat("latin-1"))


async def open_upstream(
    client: UpstreamClient,
    method: str,
    url: URL,
    forward: list[tuple[str, str]],
    body: bytes,
    timeout_s: float,
) -> UpstreamResponse:
    """Send the request as it is and wait (within `timeout_s`) for the response head.

    The body streams: read it with `aiter_raw()` (never decoded) and close the response.
    (The proxy's own paths hold one deadline for head and body: `client.open` under it.)
    """
    async with asyncio.timeout(timeout_s):
        return await client.open(method, url, forward, body)


_PREFIX_SEGMENTS = {b"http": 3, b"runs": 5}  # /http/{name}/… and /runs/{id}/http/{name}/…


def raw_rest(scope: Scope, rest: str) -> str:
    """The part of the path below `/http/{name}/`, exactly as the agent sent it (`raw_path`:
    `%2F`, `%3F`, `%23` stay encoded), confined below the upstream's base path.

    Raises `ProxyError` 400 for `..` that would climb above the base, for control characters
    (`%0d%0a`, `%00`, `%09`) and for broken `%` escapes.
    """
    raw: bytes | None = scope.get("raw_path")
    if raw is None:
        raw = quote(rest, safe="/:@!$&'()*+,;=-._~").encode()
    else:
        raw = raw.split(b"?", 1)[0]
        segments = raw.split(b"/")
        raw = (
            b"/".join(segments[_PREFIX_SEGMENTS.get(segments[1], 3) :])
            if len(segments) > 1
            else b""
        )
    kept: list[str] = []
    for segment in raw.decode("latin-1").split("/"):
        decoded = _decoded(segment)
        if decoded == ".":
            continue
        if decoded == "..":
            if not kept:
                raise ProxyError(400, "the path climbs above the upstream's base path (`..`)")
            kept.pop()
            continue
        if ".." in decoded.replace("\\", "/").split("/"):  # an upstream may decode %2F first
            raise ProxyError(400, "the path climbs above the upstream's base path (`%2F..`)")
        kept.append(segment)
    return "/".join(kept)


def _decoded(segment: str) -> str:
    """`segment` percent-decoded, for checks only; 400 for control characters or a bad escape."""
    if "%" not in segment:
        decoded = segment
    else:
        pieces = segment.split("%")
        out = [pieces[0]]
        for piece in pieces[1:]:
            code = piece[:2]
            if len(code) < 2 or not all(c in "0123456789abcdefABCDEF" for c in code):
                raise ProxyError(400, f"the path has a broken % escape: %{piece[:2]!r}")
            out.append(chr(int(code, 16)) + piece[2:])
        decoded = "".join(out)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        raise ProxyError(400, "the path holds a control character (CR, LF, NUL, TAB...)")
    return decoded


def upstream_url(upstream: Upstream, query: bytes, path: str | None = None) -> URL:
    """Where to send a request: the MCP endpoint (parsed once), or a plain HTTP tool's path."""
    if path is None and not query:
        return upstream.target
    url = upstream.url if path is None else f"{upstream.url}/{path}"
    return as_url(f"{url}?{query.decode('latin-1')}" if query else url)


# Printable ASCII but the space: what a request target may carry as it is (`%` escapes kept).
_AS_IS = "".join(chr(c) for c in range(0x21, 0x7F))


def as_url(url: str) -> URL:
    """`url` as sent: existing `%` escapes and reserved characters kept (`%2F` stays `%2F`, as
    the agent wrote it), only spaces, controls and non-ASCII percent-encoded (as UTF-8)."""
    if not url.isascii() or not url.isprintable() or " " in url:
        url = quote(url, safe=_AS_IS)
    return URL(url, encoded=True)
