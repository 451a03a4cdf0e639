"""JSON helpers shared by the scorers: canonical text, normalised equality, JSON paths."""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "JsonPath",
    "JsonPathError",
    "canonical_json",
    "normalise",
    "normalised_equal",
    "parse_json_text",
]


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON text of `value` (the identity used for hashing and dedup)."""
    return orjson.dumps(normalise(value), option=orjson.OPT_SORT_KEYS).decode()


def normalise(value: Any) -> Any:
    """Normalise a JSON value: NFC strings without surrounding whitespace, 1 == 1.0."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value).strip()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        # Integral floats become ints so that 3 and 3.0 compare and hash alike.
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): normalise(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [normalise(v) for v in value]
    return value


def normalised_equal(expected: Any, actual: Any) -> bool:
    """Equality after normalisation; booleans never equal numbers."""
    return _strict_eq(normalise(expected), normalise(actual))


def _strict_eq(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_eq(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_strict_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


@dataclass(frozen=True)
class ParsedText:
    """The outcome of parsing a JSON text attribute."""

    value: Any
    error: str | None


def parse_json_text(raw: Any, *, truncated: bool = False) -> ParsedText:
    """Parse a JSON text attribute; never raises (the error says why, e.g. truncation)."""
    if raw is None:
        return ParsedText(None, "missing")
    if not isinstance(raw, str | bytes):
        # Already decoded (some stores keep JSON attributes as objects).
        return ParsedText(raw, None)
    try:
        return ParsedText(orjson.loads(raw), None)
    except orjson.JSONDecodeError as exc:
        why = "truncated payload is not valid JSON" if truncated else f"not valid JSON: {exc}"
        return ParsedText(None, why)


class JsonPathError(ValueError):
    """A JSON path that cannot be parsed."""


_TOKEN = re.compile(
    r"""\.(?P<name>[A-Za-z_$@][\w$@-]*)      # .name
      | \[(?P<index>-?\d+)\]                  # [0]
      | \[(?P<q>['"])(?P<key>.*?)(?P=q)\]     # ['key'] or ["key"]
    """,
    re.VERBOSE,
)


@functools.cache
def _rfc9535() -> Any:
    # RFC 9535 JSONPath (wildcards, `..`, filters) through python-jsonpath in its strict mode;
    # loaded for the first such path (its import and lexer cost a CLI start ~0.1 s otherwise)
    import jsonpath

    return jsonpath.JSONPathEnvironment(strict=True)


def _query(text: str, body: str) -> Any:
    """Compile a path the fast path does not handle, as an RFC 9535 query."""
    import jsonpath

    try:
        return _rfc9535().compile("$" + body)
    except jsonpath.JSONPathError as exc:
        reason = str(exc).strip().splitlines()[0]
        raise JsonPathError(f"cannot parse JSON path {text!r}: {reason}") from exc


@dataclass(frozen=True)
class JsonPath:
    """A JSON path. Simple ones (`$`, `$.a.b`, `$.items[0]`, `$['odd key']`, leading `$`
    optional) are resolved here; any other RFC 9535 syntax (`[*]`, `..`, `[?@.name == 'Ada']`)
    is a query whose value is the list of every node it selects (found when not empty)."""

    text: str
    steps: tuple[str | int, ...]
    query: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> JsonPath:
        """Parse `text` or raise JsonPathError naming the offending position."""
        body = text.strip()
        if body.startswith("$"):
            body = body[1:]
        elif body and not body.startswith(("[", ".")):
            body = "." + body
        steps: list[str | int] = []
        pos = 0
        while pos < len(body):
            match = _TOKEN.match(body, pos)
            if match is None:
                return cls(text, (), _query(text, body))
            if match.group("name") is not None:
                steps.append(match.group("name"))
            elif match.group("index") is not None:
                steps.append(int(match.group("index")))
            else:
                steps.append(match.group("key"))
            pos = match.end()
        return cls(text, tuple(steps))

    def resolve(self, document: Any) -> tuple[bool, Any]:
        """Return (found, value) for this path in `document`."""
        if self.query is not None:
            nodes = self.query.findall(document)
            return bool(nodes), nodes
        current = document
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(current, list) or not -len(current) <= step < len(current):
                    return False, None
                current = current[step]
            else:
                if not isinstance(current, dict) or step not in current:
                    return False, None
                current = current[step]
        return True, current
