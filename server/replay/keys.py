"""Request keys: what makes a live request "the same" as a recorded one.

A key is (role, method, target, canonical arguments). Arguments are compared as stored: the
live request's arguments go through the upstream's redactor first, so a redacted value matches
its recorded fingerprint (and only that). `_meta` is never part of a key (it carries trace ids
and progress tokens); handshakes and list requests without a cursor match on their method alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

DESCRIBE_MAX = 300
# Methods whose parameters describe the client, not the question: matched by method alone.
_BY_METHOD = frozenset({"initialize", "server/discover", "ping"})


@dataclass(frozen=True, slots=True)
class RequestKey:
    """A request, as matched: who sent it, what it asks, and its canonical arguments."""

    role: str
    method: str  # JSON-RPC method, or "METHOD /path" for a plain HTTP call
    target: str  # tool name, resource URI, prompt name ("" when none)
    arguments: str  # canonical JSON text ("" when the method matches without arguments)

    def loose(self) -> tuple[str, str, str]:
        """The key without arguments (`match = "ignore-args"`)."""
        return (self.role, self.method, self.target)

    def describe(self) -> str:
        """The request in one line, cut at `DESCRIBE_MAX` characters (a model call's body is a
        whole conversation: `first_difference` names where two of them part)."""
        head = f"{self.method} {self.target}".strip()
        text = f"{head} {self.arguments}" if self.arguments else head
        if len(text) <= DESCRIBE_MAX:
            return text
        return f"{text[:DESCRIBE_MAX]}…({len(text)} characters)"


def drop_paths(document: Any, paths: list[str]) -> Any:
    """`document` without the values at `paths` (`$.a.b`, `$.a[0].b`); missing paths are fine."""
    if not paths:
        return document
    document = orjson.loads(orjson.dumps(document))  # a copy the caller's value never sees
    for path in paths:
        steps = _steps(path)
        holder = document
        for step in steps[:-1]:
            holder = _child(holder, step)
            if holder is None:
                break
        else:
            last = steps[-1] if steps else None
            if isinstance(holder, dict) and isinstance(last, str):
                holder.pop(last, None)
            elif (
                isinstance(holder, list)
                and isinstance(last, int)
                and -len(holder) <= last < len(holder)
            ):
                holder[last] = None
    return document


def _steps(path: str) -> list[str | int]:
    steps: list[str | int] = []
    for part in path[2:].replace("]", "").split("."):
        name, *indexes = part.split("[")
        if name:
            steps.append(name)
        steps.extend(int(i) for i in indexes if i.lstrip("-").isdigit())
    return steps


def _child(holder: Any, step: str | int) -> Any:
    if isinstance(holder, dict) and isinstance(step, str):
        return holder.get(step)
    if isinstance(holder, list) and isinstance(step, int) and -len(holder) <= step < len(holder):
        return holder[step]
    return None


def canonical(document: Any, ignore: list[str]) -> str:
    """Sorted-key JSON of `document` with the ignored paths taken out."""
    return orjson.dumps(drop_paths(document, ignore), option=orjson.OPT_SORT_KEYS).decode()


def mcp_key(
    role: str, method: str, target: str | None, params: Any, ignore: list[str]
) -> RequestKey:
    """The key of an MCP request; `params` as stored (redacted), `_meta` taken out."""
    if method in _BY_METHOD or method.startswith("notifications/"):
        return RequestKey(role, method, target or "", "")
    document = dict(params) if isinstance(params, dict) else {}
    document.pop("_meta", None)
    if method == "tools/call":
        document = {"arguments": document.get("arguments") or {}}
    elif target is not None:
        document.pop("uri", None)
        document.pop("name", None)
    return RequestKey(role, method, target or "", canonical(document, ignore))


def http_key(
    role: str, method: str, path: str, query: str, arguments: Any, ignore: list[str]
) -> RequestKey:
    """The key of a plain HTTP call: `METHOD /path`, the query and the body (`$.arguments`)."""
    document: dict[str, Any] = {"arguments": arguments}
    if query:
        document["query"] = query
    name = f"{method.upper()} /{path.lstrip('/')}"
    return RequestKey(role, name, "", canonical(document, ignore))


def distance(a: str, b: str) -> int:
    """How far apart two canonical argument texts are: differing top-level leaves, else chars."""
    try:
        left, right = orjson.loads(a or "{}"), orjson.loads(b or "{}")
    except orjson.JSONDecodeError:
        return abs(len(a) - len(b)) + sum(x != y for x, y in zip(a, b, strict=False))
    return _leaf_distance(left, right)


def _leaf_distance(left: Any, right: Any) -> int:
    if isinstance(left, dict) and isinstance(right, dict):
        keys = set(left) | set(right)
        return sum(_leaf_distance(left.get(k), right.get(k)) for k in keys)
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return sum(_leaf_distance(x, y) for x, y in zip(left, right, strict=True))
    return 0 if left == right else 1


def first_difference(a: str, b: str) -> str | None:
    """The JSON path (as `ignore` takes it) where two canonical argument texts first differ."""
    try:
        left, right = orjson.loads(a or "{}"), orjson.loads(b or "{}")
    except orjson.JSONDecodeError:
        return None if a == b else "$"
    return _difference(left, right, "$")


def _difference(left: Any, right: Any, path: str) -> str | None:
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            if key not in left or key not in right:
                return f"{path}.{key}"
            found = _difference(left[key], right[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(left, list) and isinstance(right, list):
        for i in range(max(len(left), len(right))):
            if i >= len(left) or i >= len(right):
                return f"{path}[{i}]"
            found = _difference(left[i], right[i], f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if left == right else path
