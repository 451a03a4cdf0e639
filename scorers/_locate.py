"""Located problems in TOML or JSON files (suites and tracecard.toml share one format):
`{file}:{line}: {field.path}: {reason}`, with best-effort line numbers for a field path."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

__all__ = ["LocatedIssue", "dotted", "find_line", "reason_of", "toml_error_line"]


@dataclass(frozen=True)
class LocatedIssue:
    """One problem in a file (or a variable), located as precisely as possible."""

    source: str
    line: int | None
    path: str
    reason: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.path}: {self.reason}" if self.path else f"{where}: {self.reason}"


def dotted(loc: tuple[str | int, ...]) -> str:
    """`("tasks", 0, "id")` -> `tasks[0].id`."""
    out = ""
    for step in loc:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def reason_of(error: Any) -> str:
    """A pydantic error in words a person wrote the file in."""
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    """The line tomllib names in its message (`... (at line 3, column 5)`)."""
    found = re.search(r"at line (\d+)", str(exc))
    return int(found.group(1)) if found else None


def _key_line(lines: list[str], start: int, end: int, key: str, fmt: str) -> int | None:
    escaped = re.escape(key)
    if fmt == "json":
        pattern = re.compile(rf'"{escaped}"\s*:')
    else:
        # `key =`, `"key" =`, `[a.key]`, `[[a.key]]` or `{ key = ... }`.
        pattern = re.compile(rf'(^|[\s{{,.\[])"?{escaped}"?\s*(=|\]|\.)')
    for number in range(start, end):
        if pattern.search(lines[number]):
            return number
    return None


_HEADER = re.compile(r"^\s*\[\[?\s*([\w.\"-]+?)\s*\]\]?")


def _nth_table(
    lines: list[str], start: int, stop: int, key: str, index: int
) -> tuple[int, int] | None:
    """Line of the `index`-th `[[...key]]` header after `start`, and where that table ends
    (the next header of the same array, or of a table outside it)."""
    header = re.compile(rf"^\s*\[\[\s*((?:[\w.\"-]+\.)?{re.escape(key)})\s*\]\]")
    seen = -1
    for number in range(start, stop):
        match = header.match(lines[number])
        if match:
            seen += 1
            if seen == index:
                name = match.group(1)
                for after in range(number + 1, stop):
                    other = _HEADER.match(lines[after])
                    if other and not other.group(1).startswith(name + "."):
                        return number, after
                return number, stop
    return None


def find_line(text: str, loc: tuple[str | int, ...], fmt: str) -> int | None:
    """1-based line where the element at `loc` is written (for a missing field: where its
    table starts), or None when it cannot be told."""
    lines = text.splitlines()
    line, end = 0, len(lines)
    found: int | None = None
    previous: str | int | None = None
    for step in loc:
        hit: int | None = None
        if isinstance(step, int):
            if fmt == "toml" and isinstance(previous, str):
                table = _nth_table(lines, line, end, previous, step)
                if table is not None:
                    hit, end = table
        else:
            hit = _key_line(lines, line, end, step, fmt)
        if hit is not None:
            line = hit
            found = hit
        previous = step
    return None if found is None else found + 1
