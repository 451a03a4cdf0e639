"""Best-effort line numbers for a dotted field path inside TOML or JSON suite text."""

from __future__ import annotations

import re

__all__ = ["find_line"]


def _key_line(lines: list[str], start: int, key: str, fmt: str) -> int | None:
    escaped = re.escape(key)
    if fmt == "json":
        pattern = re.compile(rf'"{escaped}"\s*:')
    else:
        # `key =`, `"key" =`, `[a.key]`, `[[a.key]]` or `{ key = ... }`.
        pattern = re.compile(rf'(^|[\s{{,.\[])"?{escaped}"?\s*(=|\]|\.)')
    for number in range(start, len(lines)):
        if pattern.search(lines[number]):
            return number
    return None


def _nth_table(lines: list[str], start: int, key: str, index: int) -> int | None:
    header = re.compile(rf"^\s*\[\[\s*(?:[\w.\"-]+\.)?{re.escape(key)}\s*\]\]")
    seen = -1
    for number in range(start, len(lines)):
        if header.match(lines[number]):
            seen += 1
            if seen == index:
                return number
    return None


def find_line(text: str, loc: tuple[str | int, ...], fmt: str) -> int | None:
    """1-based line where the element at `loc` is written, or None when it cannot be told."""
    lines = text.splitlines()
    line = 0
    found: int | None = None
    previous: str | int | None = None
    for step in loc:
        if isinstance(step, int):
            hit = (
                _nth_table(lines, line, previous, step)
                if fmt == "toml" and isinstance(previous, str)
                else None
            )
        else:
            hit = _key_line(lines, line, step, fmt)
        if hit is not None:
            line = hit
            found = hit
        previous = step
    return None if found is None else found + 1
