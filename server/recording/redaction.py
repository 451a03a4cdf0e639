"""What is redacted before storage, and how: one mechanism for every value tracecard stores.

A value whose key is a secret's (`SecretKeys`: the key's words hold an entry of
`recording.redact_keys`) is replaced by its keyed fingerprint `[redacted:<16 hex>]` (HMAC-SHA256
under the database's fingerprint key, see `tracecard.traces.secrets`): equal secrets give equal
fingerprints, so equality matchers still work, and nothing in a span reveals the value. The same
rule applies at any depth of JSON arguments and results, inside JSON carried as text (MCP text
content), to query strings and form bodies, to probe values and to ingested OTLP attributes.
Headers are replaced by `[REDACTED]`, as they always were.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

import orjson

from tracecard.server.settings import RecordingSettings
from tracecard.traces.secrets import fingerprint, is_fingerprint

__all__ = [
    "DEEP_MARKER",
    "MAX_DEPTH",
    "REDACTED",
    "Redactor",
    "SecretKeys",
    "clip_depth",
    "key_words",
]

REDACTED = "[REDACTED]"  # headers: no equality to keep
# orjson reads 1,024 levels of nesting but writes only 254: deeper payloads are stored clipped.
MAX_DEPTH: Final = 200
DEEP_MARKER: Final = f"…[truncated by tracecard: nested deeper than {MAX_DEPTH} levels]"


# camelCase humps (an acronym stays one word: `APIKey` is `api`, `key`), lower-case runs, digits;
# anything else (`_`, `-`, `.`, spaces) separates words
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_CACHE_MAX: Final = 4096  # distinct keys remembered per redactor (keys come from payloads)
_SHORT: Final = 1024  # bytes up to which `SecretKeys.in_bytes` searches with one regex


def key_words(key: str) -> tuple[str, ...]:
    """A key's words, lower-cased: `authToken` and `auth_token` are both (`auth`, `token`)."""
    return tuple(word.lower() for word in _WORD.findall(key))


class SecretKeys:
    """Which keys hold secrets: the key's words contain an entry's words in a row.

    A key word matches an entry word when it equals it, with or without a plural `s`; a key
    word may also end with an entry's first word (`oauth` holds `auth`, `accesstoken` holds
    `token`), never begin with it (`author` and `authority` are no `auth`). The answer is
    cached per key: the hot path does one dict lookup per key it has seen before.
    """

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = [words for words in (key_words(e) for e in entries) if words]
        firsts = sorted({words[0] for words in self.entries})
        pattern = "|".join(re.escape(first) for first in firsts) or r"(?!)"
        # a cheap test before walking a payload: does any entry's first word occur at all
        self.needle = re.compile(pattern, re.I)
        self.needle_bytes = re.compile(pattern.encode(), re.I)
        # the same test on bytes without a case-insensitive regex, which tries every position
        # (7 s for a 20 MB answer): ASCII lower(), then a case-sensitive alternation up to 1 KiB
        # (one search: ~0.5 us on a tool call's arguments, where 16 substring tests in a
        # generator took ~4 us), substring tests (memchr-fast) past that. A first word
        # that holds another (`apikey`, `api`) is left out: the shorter one is found in it.
        needed = [f for f in firsts if not any(o != f and o in f for o in firsts)]
        self._firsts_bytes = tuple(first.encode() for first in needed)
        self._lowered_needle = re.compile(
            "|".join(re.escape(f) for f in needed).encode() or b"(?!)"
        )
        self.longest = max((len(first) for first in firsts), default=0)
        self._known: dict[str, bool] = {}

    def in_bytes(self, data: bytes) -> bool:
        """Whether any entry's first word occurs in `data` (ASCII case-insensitively)."""
        lowered = data.lower()
        if len(lowered) <= _SHORT:
            return self._lowered_needle.search(lowered) is not None
        return any(first in lowered for first in self._firsts_bytes)

    def __call__(self, key: str) -> bool:
        known = self._known.get(key)
        if known is None:
            if len(self._known) >= _CACHE_MAX:
                self._known.clear()
            known = self._known[key] = self._match(key_words(key))
        return known

    def _match(self, words: tuple[str, ...]) -> bool:
        for entry in self.entries:
            first, rest = entry[0], entry[1:]
            for i in range(len(words) - len(rest)):
                if not (words[i].endswith(first) or words[i].endswith(first + "s")):
                    continue
                following = words[i + 1 : i + 1 + len(rest)]
                if all(w in (e, e + "s") for w, e in zip(following, rest, strict=True)):
                    return True
        return False


def clip_depth(node: Any, depth: int = 0) -> Any:
    """`node` with every container nested deeper than `MAX_DEPTH` replaced by a marker."""
    if isinstance(node, dict):
        if depth >= MAX_DEPTH:
            return DEEP_MARKER
        return {k: clip_depth(v, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        if depth >= MAX_DEPTH:
            return DEEP_MARKER
        return [clip_depth(v, depth + 1) for v in node]
    return node


class Redactor:
    """Replaces secret-looking values by keyed fingerprints before storage.

    `key=None` redacts no values (only headers): for `tracecard wrap`, whose spans the server
    redacts when they arrive, under a key the shim does not have.
    """

    def __init__(
        self, settings: RecordingSettings, key: bytes | None = b"", *, values: bool = True
    ) -> None:
        self.secret_keys = SecretKeys(settings.redact_keys)
        self._needle = self.secret_keys.needle
        self.headers = frozenset(h.lower() for h in settings.redact_headers)
        self.cap = settings.payload_cap_bytes
        self.key = key
        self.values = values and key is not None and bool(self.secret_keys.entries)
        self._settings = settings
        self._attribute_names: dict[str, bool] = {}  # attribute name -> secret (ingest)

    def plain(self) -> Redactor:
        """The same, with values kept in clear (`redact = false` on an upstream)."""
        return Redactor(self._settings, self.key, values=False)

    def secret_key(self, name: str) -> bool:
        """True when a value under this key (or field name) is redacted."""
        return self.values and self.secret_keys(name)

    def mask(self, value: Any) -> str:
        """The stored form of a secret value; a fingerprint stays itself (a replayed answer
        hands the agent fingerprints, and what it sends back must match their recording)."""
        if is_fingerprint(value):
            return str(value)
        return fingerprint(self.key or b"", value)

    def value(self, node: Any) -> Any:
        """`node` with every secret value (at any depth, and in JSON text) fingerprinted."""
        if not self.values:
            return node
        return self._walk(node)

    def _walk(self, node: Any, secret: bool = False) -> Any:
        # under a secret key every string is fingerprinted; numbers and booleans stay (counts
        # such as `max_tokens` are no secrets)
        if isinstance(node, dict):
            return {k: self._walk(v, secret or self.secret_key(str(k))) for k, v in node.items()}
        if isinstance(node, list):
            return [self._walk(v, secret) for v in node]
        if isinstance(node, str):
            if secret:
                return self.mask(node)
            if node[:1] in ("{", "[") and self._needle.search(node):  # JSON carried as text
                try:
                    inner = orjson.loads(node)
                except orjson.JSONDecodeError:
                    return node
                redacted = self._walk(inner)
                return node if redacted == inner else orjson.dumps(redacted).decode()
        return node

    def attributes(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """Span attributes from outside (OTLP ingest): a secret-looking name (its last dotted
        part) hides a string value; JSON text values are redacted inside. Changed in place
        (the values only), and returned: ingest calls this for every span it stores."""
        if not self.values:
            return attributes
        names = self._attribute_names
        for name, value in attributes.items():
            if type(value) is not str:
                continue
            secret = names.get(name)
            if secret is None:
                if len(names) >= _CACHE_MAX:
                    names.clear()
                secret = names[name] = self.secret_key(name.rsplit(".", 1)[-1])
            if secret:
                attributes[name] = self.mask(value)
            elif value.startswith(("{", "[")) and self._needle.search(value):
                attributes[name] = self._walk(value)
        return attributes

    def header_items(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        return {
            f"http.request.header.{name.lower()}": REDACTED if name.lower() in self.headers else v
            for name, v in headers
        }

    def text(self, node: Any) -> tuple[str, bool]:
        """JSON text of `node` after redaction, truncated to the cap (with a marker)."""
        clipped = False
        try:
            encoded = orjson.dumps(node, default=str)
        except orjson.JSONEncodeError:  # nested too deep for the encoder: store a clipped copy
            node, clipped = clip_depth(node), True
            encoded = orjson.dumps(node, default=str)
        # Only the first `cap` bytes are stored: a key past them (its value comes after it) is
        # cut with it, so a long payload is searched for secret keys in the stored part only
        window = (
            encoded if len(encoded) <= self.cap else encoded[: self.cap + self.secret_keys.longest]
        )
        if self.values and self.secret_keys.in_bytes(window):  # only then copy and redact
            encoded = orjson.dumps(self._walk(node), default=str)
        text, cut = self.cut(encoded)
        return text, cut or clipped

    def query(self, query: str) -> str:
        """A query string (or form body) with the values of secret fields fingerprinted."""
        if not self.values or not query or not self._needle.search(query):
            return query
        pairs = parse_qsl(query, keep_blank_values=True)
        if not any(self.secret_key(k) for k, _ in pairs):
            return query
        return urlencode([(k, self.mask(v) if self.secret_key(k) else v) for k, v in pairs])

    def cut(self, raw: bytes) -> tuple[str, bool]:
        if len(raw) <= self.cap:
            return raw.decode("utf-8", errors="replace"), False
        head = raw[: self.cap].decode("utf-8", errors="ignore")
        return f"{head}…[truncated by tracecard: original size {len(raw)} bytes]", True
