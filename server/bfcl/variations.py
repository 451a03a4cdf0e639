"""Surface variations of a trajectory, as real models produce them: each changes one call or one
argument of the ground truth, chosen with a seed, and BFCL's own checker decides whether the
result still passes. They exist to drive every branch of BFCL's checkers both ways
(docs/benchmarks/bfcl.md, "Every branch, both ways").

Argument variations touch a top-level argument (or an item of a list or object argument) of the
right kind: `case` (swapped case), `punctuation` (a space written `_`, else a `.` appended:
characters BFCL's standardisation removes), `other_punctuation` (`!` appended: it does not),
`outer_whitespace`, `inner_whitespace` (a doubled space), `tab` (a space written as a tab),
`int_as_float` (`2` -> `2.0`), `float_as_int` (`2.0` -> `2`), `number_as_string`,
`bool_as_string`, `wrong_type` (a value of another JSON type), `list_item_case`,
`dict_value_case`, `list_reordered`, `list_item_dropped`, `reordered_keys` (the arguments', and
an object argument's, keys in reverse order), `optional_omitted` (an argument BFCL's answer, or
the method's signature, lets be left out), `required_omitted`, `optional_default` (a parameter
given as its documented default), `undeclared_argument`. Call variations: `early` (a call one
turn early), `extra_read_only` (a read-only call added: one with no required parameter that
leaves a fresh environment's state as it was), `swap_duplicate` (a call replaced by a copy of
another call of its turn).
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from functools import cache
from typing import Any

from tracecard.server.bfcl.env import Environment, possible_answers
from tracecard.server.bfcl.mcp_server import find_entry, tool_docs
from tracecard.server.bfcl.miss_func import hidden_at

__all__ = ["VARIATIONS", "vary"]

Turns = list[list[dict[str, Any]]]
_VALUE_VARIATIONS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], Any]]] = {
    "case": (lambda v: isinstance(v, str) and v.swapcase() != v, lambda v: v.swapcase()),
    "punctuation": (
        lambda v: isinstance(v, str) and v != "",
        lambda v: v.replace(" ", "_", 1) if " " in v else v + ".",
    ),
    "other_punctuation": (lambda v: isinstance(v, str), lambda v: v + "!"),
    "outer_whitespace": (lambda v: isinstance(v, str), lambda v: f" {v} "),
    "inner_whitespace": (lambda v: isinstance(v, str) and " " in v, lambda v: v.replace(" ", "  ")),
    "tab": (lambda v: isinstance(v, str) and " " in v, lambda v: v.replace(" ", "\t", 1)),
    "int_as_float": (lambda v: type(v) is int, float),
    "float_as_int": (lambda v: type(v) is float and v.is_integer(), int),
    "number_as_string": (lambda v: type(v) in (int, float), str),
    "bool_as_string": (lambda v: type(v) is bool, lambda v: str(v).lower()),
    "wrong_type": (lambda v: True, lambda v: 1 if isinstance(v, str | list | dict) else str(v)),
    "list_item_case": (
        lambda v: isinstance(v, list) and any(isinstance(i, str) and i.swapcase() != i for i in v),
        lambda v: _first_changed(v, lambda i: isinstance(i, str) and i.swapcase() != i),
    ),
    "dict_value_case": (
        lambda v: (
            isinstance(v, dict)
            and any(isinstance(i, str) and i.swapcase() != i for i in v.values())
        ),
        lambda v: _dict_changed(v),
    ),
    "list_reordered": (lambda v: isinstance(v, list) and v != v[::-1], lambda v: v[::-1]),
    "list_item_dropped": (lambda v: isinstance(v, list) and len(v) >= 2, lambda v: v[:-1]),
}
_CALL_VARIATIONS = (
    "reordered_keys",
    "optional_omitted",
    "required_omitted",
    "optional_default",
    "undeclared_argument",
    "early",
    "extra_read_only",
    "swap_duplicate",
)
VARIATIONS: tuple[str, ...] = (*_VALUE_VARIATIONS, *_CALL_VARIATIONS)


def _first_changed(items: list[Any], applies: Callable[[Any], bool]) -> list[Any]:
    index = next(i for i, item in enumerate(items) if applies(item))
    return [*items[:index], items[index].swapcase(), *items[index + 1 :]]


def _dict_changed(value: dict[str, Any]) -> dict[str, Any]:
    key = next(k for k, v in value.items() if isinstance(v, str) and v.swapcase() != v)
    return {**value, key: value[key].swapcase()}


def _calls(turns: Turns) -> list[tuple[int, int]]:
    return [(t, c) for t, turn in enumerate(turns) for c in range(len(turn))]


@cache
def _signatures(entry_id: str) -> dict[str, tuple[set[str], dict[str, Any]]]:
    """Per function: its required parameters and its documented defaults (single-turn: the
    function doc; multi-turn: the method's signature)."""
    entry = find_entry(entry_id)
    found: dict[str, tuple[set[str], dict[str, Any]]] = {}
    if "involved_classes" in entry:
        for name, method in Environment(entry).methods.items():
            parameters = inspect.signature(method).parameters.values()
            required = {p.name for p in parameters if p.default is inspect.Parameter.empty}
            defaults = {
                p.name: p.default
                for p in parameters
                if p.default is not inspect.Parameter.empty
                and isinstance(p.default, str | int | float | bool)
            }
            found[name] = (required, defaults)
        return found
    for doc in entry.get("function", []):
        declared = doc.get("parameters") or {}
        properties = declared.get("properties") or {}
        defaults = {k: s["default"] for k, s in properties.items() if "default" in s}
        found[doc["name"]] = (set(declared.get("required") or []), defaults)
    return found


def _omittable(entry_id: str, tool: str, given: dict[str, Any]) -> set[str]:
    """Arguments of `tool` the answer (single-turn) or the signature (multi-turn) lets be left
    out."""
    if "involved_classes" in find_entry(entry_id):
        return set(given) - _signatures(entry_id).get(tool, (set(), {}))[0]
    answer = possible_answers(entry_id.rsplit("_", 1)[0]).get(entry_id) or {}
    for expected in answer.get("ground_truth", []):
        if tool in expected:
            return {p for p, allowed in expected[tool].items() if "" in allowed}
    return set()


@cache
def _read_only(entry_id: str) -> tuple[str, ...]:
    """Tools with no required parameter that leave a fresh environment's state as it was."""
    entry = find_entry(entry_id)
    if "involved_classes" not in entry:
        return ()
    offered = {doc["name"] for doc in tool_docs(entry)}
    found = []
    for name, (required, _) in sorted(_signatures(entry_id).items()):
        if required or name not in offered:
            continue
        environment = Environment(entry)
        before = environment.state()
        if not environment.execute(name, {}).startswith("Error") and environment.state() == before:
            found.append(name)
    return tuple(found)


def _call_variation(entry_id: str, turns: Turns, kind: str, rng: random.Random) -> Turns | None:
    calls = _calls(turns)
    if kind == "extra_read_only":
        read_only = _read_only(entry_id)
        with_calls = sorted({t for t, _ in calls})
        if not read_only or not with_calls:
            return None
        t = rng.choice(with_calls)
        shown = [n for n in read_only if n not in hidden_at(find_entry(entry_id), t)]
        if not shown:
            return None
        turns[t].append({"tool": rng.choice(shown), "arguments": {}})
        return turns
    if kind == "early":
        movable = [(t, c) for t, c in calls if t > 0]
        if not movable:
            return None
        t, c = rng.choice(movable)
        turns[t - 1].append(turns[t].pop(c))
        return turns
    if kind == "swap_duplicate":
        pairs = [
            (t, a, b)
            for t, turn in enumerate(turns)
            for a in range(len(turn))
            for b in range(len(turn))
            if a != b and turn[a] != turn[b]
        ]
        if not pairs:
            return None
        t, a, b = rng.choice(pairs)
        turns[t][b] = dict(turns[t][a])
        return turns
    candidates = []
    for t, c in calls:
        call = turns[t][c]
        required, defaults = _signatures(entry_id).get(call["tool"], (set(), {}))
        arguments = call["arguments"]
        names: list[str]
        if kind == "reordered_keys":
            nested = any(isinstance(v, dict) and len(v) >= 2 for v in arguments.values())
            names = ["*"] if len(arguments) >= 2 or nested else []
        elif kind == "optional_omitted":
            names = sorted(set(arguments) & _omittable(entry_id, call["tool"], arguments))
        elif kind == "required_omitted":
            omittable = _omittable(entry_id, call["tool"], arguments)
            must = required if "involved_classes" in find_entry(entry_id) else set(arguments)
            names = sorted(set(arguments) & (must - omittable))
        elif kind == "optional_default":
            names = sorted(p for p in defaults if p not in required)
        else:  # undeclared_argument
            names = ["undeclared_argument"]
        candidates += [(t, c, name) for name in dict.fromkeys(names)]
    if not candidates:
        return None
    t, c, name = rng.choice(candidates)
    call = turns[t][c]
    arguments = dict(call["arguments"])
    if kind == "reordered_keys":
        arguments = dict(reversed(list(arguments.items())))
        for key, value in arguments.items():
            if isinstance(value, dict):
                arguments[key] = dict(reversed(list(value.items())))
    elif kind in ("optional_omitted", "required_omitted"):
        del arguments[name]
    elif kind == "optional_default":
        arguments[name] = _signatures(entry_id)[call["tool"]][1][name]
    else:
        arguments[name] = "x"
    turns[t][c] = {**call, "arguments": arguments}
    return turns


def vary(entry_id: str, trajectory: Turns, kind: str, seed: int) -> Turns | None:
    """`trajectory` with one variation of `kind`; None when it does not apply to it."""
    rng = random.Random(f"{entry_id}:{kind}:{seed}")
    turns = [[dict(call) for call in turn] for turn in trajectory]
    if kind in _CALL_VARIATIONS:
        return _call_variation(entry_id, turns, kind, rng)
    if kind not in _VALUE_VARIATIONS:
        raise ValueError(f"unknown variation {kind!r}; known: {', '.join(VARIATIONS)}")
    applies, change = _VALUE_VARIATIONS[kind]
    candidates = [
        (t, c, name)
        for t, c in _calls(turns)
        for name, value in turns[t][c]["arguments"].items()
        if applies(value)
    ]
    if not candidates:
        return None
    t, c, name = rng.choice(candidates)
    call = turns[t][c]
    turns[t][c] = {
        **call,
        "arguments": {**call["arguments"], name: change(call["arguments"][name])},
    }
    return turns
