"""BFCL's possible answers read as its AST checker reads them: as tracecard argument matchers
(the importer) and as the first call they allow (the replay's ground truth).

The checker goes by each parameter's type in the function doc. A `dict` parameter's allowed
values are objects whose keys list allowed values in turn (a key whose list holds `""` may be
left out; no other key is allowed; a value inside, even an object, is compared whole). An
`array` (or `tuple`) of `dict` is a list of such objects, of the same length, matched position by
position. Anything else is compared whole. An argument's allowed values become `one_of` the
values they expand to, up to `MAX_COMBINATIONS`; past that, the argument is only required to be
present (`any`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_COMBINATIONS", "first_allowed", "matcher", "param_kinds"]

MAX_COMBINATIONS = 1024  # values one argument's `one_of` may list
PLAIN, OBJECT, OBJECT_LIST = "plain", "dict", "list_dict"
_SKIP = object()


def param_kinds(entry: dict[str, Any], function: str) -> dict[str, str]:
    """How BFCL's checker reads each parameter of `function` (OBJECT, OBJECT_LIST, else PLAIN)."""
    for doc in entry.get("function", []):
        if doc.get("name") == function:
            properties = (doc.get("parameters") or {}).get("properties") or {}
            return {name: _kind(schema) for name, schema in properties.items()}
    return {}


def _kind(schema: Any) -> str:
    if not isinstance(schema, dict):
        return PLAIN
    if schema.get("type") == "dict":
        return OBJECT
    items = schema.get("items")
    if schema.get("type") in ("array", "tuple") and isinstance(items, dict):
        return OBJECT_LIST if items.get("type") == "dict" else PLAIN
    return PLAIN


def _guess(value: Any) -> str:
    """A kind from the answer's shape, for a parameter the doc does not describe."""
    if isinstance(value, dict):
        return OBJECT
    if isinstance(value, list) and value and all(_is_answer_object(v) for v in value):
        return OBJECT_LIST
    return PLAIN


def _is_answer_object(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, list) for v in value.values())


def _allowed(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else [raw]


def _objects(answer: dict[str, Any], budget: int) -> list[dict[str, Any]] | None:
    """Every object one possible-answer object allows; None past `budget` of them."""
    keys = list(answer)
    options: list[list[Any]] = []
    count = 1
    for key in keys:
        allowed = _allowed(answer[key])
        choice = [v for v in allowed if v != ""] + ([_SKIP] if "" in allowed else [])
        options.append(choice or [_SKIP])
        count *= len(options[-1])
        if count > budget:
            return None
    return [
        {k: v for k, v in zip(keys, picked, strict=True) if v is not _SKIP}
        for picked in itertools.product(*options)
    ]


def _object_lists(answer: list[Any], budget: int) -> list[list[dict[str, Any]]] | None:
    """Every list a possible-answer list of objects allows (position by position)."""
    per_position = []
    count = 1
    for item in answer:
        objects = _objects(item, budget) if isinstance(item, dict) else [item]
        if objects is None:
            return None
        per_position.append(objects)
        count *= len(objects)
        if count > budget:
            return None
    return [list(chosen) for chosen in itertools.product(*per_position)]


def _expanded(value: Any, kind: str, budget: int) -> list[Any] | None:
    if kind == OBJECT and isinstance(value, dict):
        return _objects(value, budget)
    if kind == OBJECT_LIST and isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return _object_lists(value, budget)
    return [value]


def _values(allowed: list[Any], kind: str | None) -> Iterator[list[Any] | None]:
    for value in allowed:
        if value != "":
            yield _expanded(value, kind or _guess(value), MAX_COMBINATIONS)


def matcher(allowed: Any, kind: str | None = None) -> dict[str, Any]:
    """The argument matcher of one parameter's allowed values (`kind`: from `param_kinds`)."""
    allowed = _allowed(allowed)
    values: list[Any] = []
    for expanded in _values(allowed, kind):
        if expanded is None or len(values) + len(expanded) > MAX_COMBINATIONS:
            values = []
            break
        values.extend(expanded)
    found: dict[str, Any] = {"one_of": values} if values else {"any": True}
    if "" in allowed:
        found["optional"] = True
    return found


def first_allowed(allowed: Any, kind: str | None = None) -> tuple[bool, Any]:
    """The first value a parameter's possible answer allows; (False, None) when it is only
    ever left out."""
    for value in _allowed(allowed):
        if value != "":
            return True, _first(value, kind or _guess(value))
    return False, None


def _first(value: Any, kind: str) -> Any:
    if kind == OBJECT and isinstance(value, dict):
        picked = {k: [v for v in _allowed(a) if v != ""] for k, a in value.items()}
        return {k: options[0] for k, options in picked.items() if options}
    if kind == OBJECT_LIST and isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return [_first(item, OBJECT) for item in value]
    return value
