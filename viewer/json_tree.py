"""JSON as a collapsible tree, rendered on the server: nested `<details>` (no script, no inline
style), every key and value escaped. Objects and arrays open to `OPEN_DEPTH`, deeper ones
closed with their size in the summary; past `MAX_NODES` the tree is not drawn (the caller shows
the indented text instead)."""

from __future__ import annotations

from html import escape
from typing import Any, Final

import orjson
from markupsafe import Markup

OPEN_DEPTH: Final = 4
MAX_NODES: Final = 1500


class _TooBig(Exception):
    pass


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return f'<span class="j-s">{escape(orjson.dumps(value).decode())}</span>'
    if value is None or isinstance(value, bool):
        return f'<span class="j-l">{orjson.dumps(value).decode()}</span>'
    if isinstance(value, (int, float)):
        return f'<span class="j-n">{escape(str(value))}</span>'
    return f'<span class="j-s">{escape(repr(value))}</span>'


def _node(key: str, value: Any, depth: int, budget: list[int]) -> str:
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooBig
    label = f'<span class="j-k">{escape(key)}</span>: ' if key else ""
    if isinstance(value, dict):
        items = [(orjson.dumps(str(k)).decode(), v) for k, v in value.items()]
        brackets, size = ("{", "}"), f"{len(items)} key{'s' if len(items) != 1 else ''}"
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
        brackets, size = ("[", "]"), f"{len(items)} item{'s' if len(items) != 1 else ''}"
    else:
        return f"<li>{label}{_scalar(value)}</li>"
    if not items:
        return f'<li>{label}<span class="j-l">{brackets[0]}{brackets[1]}</span></li>'
    children = "".join(_node(k, v, depth + 1, budget) for k, v in items)
    state = " open" if depth < OPEN_DEPTH else ""
    return (
        f'<li><details{state}><summary>{label}{brackets[0]} <span class="j-c">{size}</span>'
        f"</summary><ul>{children}</ul>{brackets[1]}</details></li>"
    )


def json_tree(value: Any) -> Markup | None:
    """`value` as a tree of `<details>`, or None for a scalar or a value too large to draw."""
    if not isinstance(value, (dict, list)) or not value:
        return None
    try:
        return Markup(f'<ul class="json-tree">{_node("", value, 0, [MAX_NODES])}</ul>')
    except _TooBig:
        return None
