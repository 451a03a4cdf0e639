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
from typing import Any

from tracecard.scorers.equality import type_name

__all__ = ["MAX_COMBINATIONS", "first_allowed", "matcher", "param_docs", "param_kinds"]

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


def param_docs(entry: dict[str, Any], function: str) -> tuple[dict[str, Any], list[str]]:
    """The parameters `function`'s doc declares (by name) and the ones it requires."""
    for doc in entry.get("function", []):
        if doc.get("name") == function:
            parameters = doc.get("parameters") or {}
            return dict(parameters.get("properties") or {}), list(parameters.get("required") or [])
    return {}, []


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


# BFCL's PYTHON_TYPE_MAPPING (`any` is str, `tuple` a list; a float parameter also takes an int,
# which the checker converts) as the JSON types the value may have
_DECLARED = {
    "string": "string",
    "any": "string",
    "integer": "integer",
    "float": "number",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "dict": "object",
}
# What `type(value) == ...` accepts of each declared type, as JSON type names
_EXACT = {"number": "float"}


def _item_types(schema: dict[str, Any], allowed: list[Any]) -> list[str] | None:
    """The item types BFCL's nested check lets through: the declared item type, or the type of
    the first item of one of the answer's lists; none at all when an allowed value is not a list
    (it skips the check then, `""` included)."""
    if any(not isinstance(value, list) for value in allowed):
        return None
    items = schema.get("items")
    if not isinstance(items, dict):
        items = {}
    declared = _DECLARED.get(str(items.get("type")))
    found = [_EXACT.get(declared, declared)] if declared else []
    for value in allowed:
        first = next((v for v in value if v != ""), _SKIP)
        if first is not _SKIP and type_name(first) not in found:
            found.append(type_name(first))
    return found


def matcher(
    allowed: Any, schema: dict[str, Any] | None = None, required: bool = False
) -> dict[str, Any]:
    """The argument matcher of one parameter's possible answer, as BFCL's AST checker reads it
    (`schema`: the parameter in the function doc; `required`: the doc requires it).

    Given, the value must have the declared type (an int passes for a float); when the answer's
    values are of another type (BFCL's "variable" case: `None`, a name), that type passes too and
    values are compared as Python's `==` without standardisation. Otherwise strings, and the
    strings inside a list or an object, are compared after BFCL's standardisation; numbers as
    Python's `==` (`2 == 2.0`, but a `2.0` fails the integer type). Left out: allowed when the
    answer allows `""` and the doc does not require it; that `""` is also a value a string may
    take, and `[]` one a list may. A parameter the doc does not declare may never be given."""
    allowed = _allowed(allowed)
    values = [v for v in allowed if v != ""]
    optional = {"optional": True} if "" in allowed and not required else {}
    if schema is None or _DECLARED.get(str(schema.get("type"))) is None:
        return {"one_of": [], **optional}  # BFCL: unexpected parameter when given
    declared = _DECLARED[str(schema.get("type"))]
    kind = _kind(schema)
    # BFCL compares a given string with every str of the answer, `""` included: given `""`
    # matches where leaving the argument out is allowed
    empty = [""] if "" in allowed else []
    if values and type_name(values[0]) not in (_EXACT.get(declared, declared), declared):
        types = [declared, type_name(values[0])]
        return {"one_of": values + empty, "normalize": "python", "type": types, **optional}
    found: dict[str, Any] = {"type": [declared], **optional}
    if declared == "string":
        strings = [v for v in values if isinstance(v, str)] + empty
        return {"one_of": strings, "normalize": "bfcl"} | found
    if declared not in ("array", "object"):
        return {"one_of": values, "normalize": "python"} | found
    expanded: list[Any] = []
    for value in values:
        more = _expanded(value, kind, MAX_COMBINATIONS)
        if more is None or len(expanded) + len(more) > MAX_COMBINATIONS:
            return {"any": True} | found
        expanded.extend(more)
    if declared == "array":
        if "" in allowed:
            expanded.append([])  # BFCL reads a `""` of a list parameter as the empty list
        items = _item_types(schema, allowed)
        if items is not None:
            found["items"] = items
    return {"one_of": expanded, "normalize": "bfcl"} | found


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
