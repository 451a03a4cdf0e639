"""Concrete values for the built-in agents: a value that satisfies an argument matcher, an
answer that passes a task's answer checks, and seeded random values valid under a JSON schema.

Pure functions (no I/O); the randomness comes from the `random.Random` passed in.
"""

from __future__ import annotations

import importlib
import random
import re
from collections.abc import Sequence
from typing import Any

from tracecard.scorers.matchers import AnswerCheck, ArgMatcher

__all__ = ["answer_for", "example_of_regex", "random_value", "value_for"]

# the parser the `re` module itself uses (no public API; stable since Python 3.11)
_sre_constants: Any = importlib.import_module("re._constants")
_sre_parser: Any = importlib.import_module("re._parser")

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_MAX_REPEAT_SHOWN = 3  # `x*`/`x+` write at most this many copies


def _category_char(category: Any) -> str:
    name = str(category)
    if "DIGIT" in name:
        return "0" if "NOT" not in name else "a"
    if "SPACE" in name:
        return " " if "NOT" not in name else "a"
    return "a" if "NOT" not in name else " "


def _in_char(items: Sequence[tuple[Any, Any]]) -> str:
    """One character a `[...]` class accepts (a negated class: one it does not name)."""
    c = _sre_constants
    if items and items[0][0] is c.NEGATE:
        named = {chr(v) for op, v in items[1:] if op is c.LITERAL}
        return next(ch for ch in _ALPHABET + "0123456789" if ch not in named)
    for op, value in items:
        if op is c.LITERAL:
            return chr(value)
        if op is c.RANGE:
            return chr(value[0])
        if op is c.CATEGORY:
            return _category_char(value)
    return "a"


def _example(parsed: Any) -> str:
    c = _sre_constants
    out: list[str] = []
    for op, value in parsed:
        if op is c.LITERAL:
            out.append(chr(value))
        elif op is c.NOT_LITERAL:
            out.append("a" if chr(value) != "a" else "b")
        elif op is c.ANY:
            out.append("a")
        elif op is c.IN:
            out.append(_in_char(value))
        elif op is c.BRANCH:
            out.append(_example(value[1][0]))
        elif op is c.SUBPATTERN:
            out.append(_example(value[-1]))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, _high, item = value
            out.append(_example(item) * max(low, 1))
        elif op is c.GROUPREF:
            continue  # a back reference: the written text above already repeats it
        # AT (anchors), ASSERT, ASSERT_NOT, CATEGORY outside a class: nothing to write
        elif op is c.CATEGORY:
            out.append(_category_char(value))
    return "".join(out)


def example_of_regex(pattern: str) -> str | None:
    """A short string that `re.search(pattern, ...)` finds, or None when the one built from the
    pattern's first alternatives does not match (look-arounds, back references)."""
    try:
        text = _example(_sre_parser.parse(pattern))
    except (re.error, StopIteration, TypeError, ValueError):
        return None
    return text if re.search(pattern, text) else None


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    if isinstance(kind, str):
        return [kind]
    found: list[str] = []
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            if isinstance(branch, dict):
                found += _types(branch)
    return found


def _branch(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A non-null branch of an anyOf/oneOf (null only when it is the only one)."""
    branches = [
        b for key in ("anyOf", "oneOf") for b in schema.get(key) or [] if isinstance(b, dict)
    ]
    if not branches:
        return schema
    useful = [b for b in branches if _types(b) != ["null"]] or branches
    return rng.choice(useful)


def random_value(schema: Any, rng: random.Random, *, depth: int = 0) -> Any:
    """A seeded random value valid under a (simple) JSON schema: enums, consts, types,
    anyOf/oneOf, required properties (optional ones half the time), bounded arrays."""
    if not isinstance(schema, dict):
        return rng.choice(_ALPHABET)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    if "anyOf" in schema or "oneOf" in schema:
        return random_value(_branch(schema, rng), rng, depth=depth)
    kinds = [k for k in _types(schema) if k != "null"] or _types(schema) or ["string"]
    kind = rng.choice(kinds)
    if kind == "string":
        length = max(int(schema.get("minLength", 1)), rng.randint(3, 8))
        return "".join(rng.choice(_ALPHABET) for _ in range(length))
    if kind == "integer":
        low = int(schema.get("minimum", 0))
        return rng.randint(low, max(low, int(schema.get("maximum", low + 100))))
    if kind == "number":
        floor = float(schema.get("minimum", 0.0))
        return round(rng.uniform(floor, float(schema.get("maximum", floor + 100.0))), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        size = max(int(schema.get("minItems", 0)), rng.randint(1, 2)) if depth < 3 else 0
        return [random_value(schema.get("items", {}), rng, depth=depth + 1) for _ in range(size)]
    if kind == "object":
        return random_object(schema, rng, depth=depth + 1, optional=0.5 if depth < 3 else 0.0)
    return None


def random_object(
    schema: dict[str, Any], rng: random.Random, *, depth: int = 0, optional: float = 0.5
) -> dict[str, Any]:
    """Every required property of an object schema, and each optional one with `optional`
    probability."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    found: dict[str, Any] = {}
    for name, sub in properties.items():
        if name in required or rng.random() < optional:
            found[name] = random_value(sub, rng, depth=depth)
    return found


def _fits(value: Any, schema: dict[str, Any] | None) -> Any:
    """A string where the schema wants an array of strings becomes a one-item array."""
    if schema is None or not isinstance(value, str):
        return value
    kinds = _types(schema)
    if "array" in kinds and "string" not in kinds:
        return [value]
    if "integer" in kinds and "string" not in kinds and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def value_for(
    matcher: ArgMatcher,
    schema: dict[str, Any] | None,
    rng: random.Random,
    candidates: Sequence[Any] = (),
) -> tuple[bool, Any]:
    """A value that satisfies `matcher`, as `(give it, value)`: an optional matcher is left out.

    `candidates` are values the task names elsewhere (its predicates' and answer checks'
    values): a regex is satisfied with one of them when one matches, so the value the oracle
    writes is the one the outcome then looks for ("VPN", not "vpn", for `(?i)vpn`)."""
    if matcher.optional:
        return False, None
    if matcher.kind == "exact":
        return True, matcher.exact
    if matcher.kind == "one_of":
        return True, (matcher.one_of or [None])[0]
    if matcher.kind == "number":
        number = float(matcher.number or 0.0)
        return True, int(number) if number.is_integer() else number
    if matcher.kind == "subset":
        return True, dict(matcher.subset or {})
    if matcher.kind == "regex":
        pattern = matcher.regex or ""
        for candidate in candidates:
            if isinstance(candidate, str) and re.search(pattern, candidate):
                return True, _fits(candidate, schema)
        example = example_of_regex(pattern)
        return True, _fits(example if example is not None else pattern, schema)
    return True, random_value(schema or {"type": "string"}, rng)  # any


def _number_text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(number)


def answer_for(checks: Sequence[AnswerCheck], rng: random.Random) -> str | None:
    """A final answer that passes every check (None: no check to satisfy). An `exact` check is
    the whole answer; otherwise the parts each check needs, joined by spaces."""
    if not checks:
        return None
    for check in checks:
        if check.kind == "exact":
            return check.exact or ""
    parts: list[str] = []
    for check in checks:
        if check.kind == "contains":
            parts.append(check.contains or "")
        elif check.kind == "number":
            parts.append(_number_text(float(check.number or 0.0)))
        elif check.kind == "regex":
            parts.append(example_of_regex(check.regex or "") or "")
        elif check.kind == "json_schema":
            import json

            return json.dumps(random_value(check.json_schema or {}, rng))
    return " ".join(p for p in parts if p)
