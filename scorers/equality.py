"""Equalities a matcher or predicate can ask for besides the default normalised one: Python's
`==` on the decoded values (`normalize = "python"`), BFCL's string standardisation followed by
Python's `==` (`normalize = "bfcl"`), and the JSON types a value has (`type`, `items`).

JSON has no maps with non-string keys, no sets and no tuples. A value snapshot that holds them
(e.g. an environment's state) writes them as tagged objects, which `python_value` reads back:
`{"$map": [[key, value], ...]}`, `{"$set": [...]}`, `{"$tuple": [...]}`. Compared as Python
compares them, `{2: "a"}` equals `{2.0: "a"}` and not `{"2": "a"}`; a set ignores order; a tuple
never equals a list.
"""

from __future__ import annotations

import re
from typing import Any, Literal

__all__ = [
    "JSON_TYPES",
    "MAP_TAG",
    "SET_TAG",
    "TUPLE_TAG",
    "JsonType",
    "bfcl_equal",
    "bfcl_standardized",
    "has_type",
    "python_equal",
    "python_value",
    "standardize_string",
    "type_name",
]

MAP_TAG, SET_TAG, TUPLE_TAG = "$map", "$set", "$tuple"
JsonType = Literal["string", "integer", "float", "number", "boolean", "array", "object", "null"]
JSON_TYPES: tuple[str, ...] = (
    "string",
    "integer",
    "float",
    "number",
    "boolean",
    "array",
    "object",
    "null",
)
# bfcl_eval 2026.3.23, ast_checker.standardize_string: these characters removed, then lower().
_BFCL_REMOVED = re.compile(r"[ \,\.\/\-\_\*\^]")


def type_name(value: Any) -> str:
    """The JSON type of a decoded value; `integer` and `float` apart (`2` is not `2.0`)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__


def has_type(value: Any, allowed: list[str]) -> bool:
    """Whether `value` is of one of `allowed` (`number`: an integer or a float)."""
    name = type_name(value)
    return name in allowed or ("number" in allowed and name in ("integer", "float"))


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict | set):
        return repr(value)
    return value


def python_value(value: Any) -> Any:
    """A decoded JSON value with the tagged maps, sets and tuples made Python values again."""
    if isinstance(value, list):
        return [python_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == MAP_TAG and isinstance(inner, list):
            pairs = [p for p in inner if isinstance(p, list) and len(p) == 2]
            if len(pairs) == len(inner):
                return {_hashable(python_value(k)): python_value(v) for k, v in pairs}
        if tag == SET_TAG and isinstance(inner, list):
            return frozenset(_hashable(python_value(v)) for v in inner)
        if tag == TUPLE_TAG and isinstance(inner, list):
            return tuple(python_value(v) for v in inner)
    return {k: python_value(v) for k, v in value.items()}


def python_equal(expected: Any, actual: Any) -> bool:
    """Equal as Python's `==` says: no string normalisation, `2 == 2.0`, `true == 1`."""
    return bool(python_value(expected) == python_value(actual))


def standardize_string(text: str) -> str:
    """BFCL's `standardize_string`: spaces and `,./-_*^` removed, lower case, `'` as `"`.
    (Only the space character: a tab or a newline stays and is compared.)"""
    return _BFCL_REMOVED.sub("", text).lower().replace("'", '"')


def _standard_item(value: Any) -> Any:
    if isinstance(value, str):
        return standardize_string(value)
    if isinstance(value, dict):  # an object in a list: BFCL's list-of-dict checker
        return {k: standardize_string(v) if isinstance(v, str) else v for k, v in value.items()}
    return value


def bfcl_standardized(value: Any) -> Any:
    """A value as BFCL's AST checker compares it: a string standardised; the strings of a list
    and the string values of an object (and of the objects in a list) standardised; anything
    deeper as it is."""
    if isinstance(value, str):
        return standardize_string(value)
    if isinstance(value, list):
        return [_standard_item(v) for v in value]
    if isinstance(value, dict):
        return {k: standardize_string(v) if isinstance(v, str) else v for k, v in value.items()}
    return value


def bfcl_equal(expected: Any, actual: Any) -> bool:
    """BFCL's comparison: both sides standardised (`bfcl_standardized`), then Python's `==`."""
    return python_equal(bfcl_standardized(expected), bfcl_standardized(actual))
