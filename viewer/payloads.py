"""Tool payloads for display: JSON pretty-printed, sizes for people, large ones collapsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

# Payloads longer than this are collapsed behind their size and fetched when opened.
COLLAPSE_ABOVE: Final = 4096
PREVIEW_CHARS: Final = 160


def human_size(n_bytes: int) -> str:
    """1536 -> "1.5 KB"."""
    size = float(n_bytes)
    for unit in ("B", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} MB"


def parse_json_text(value: Any) -> Any:
    """A JSON-text attribute as a value; text that is not JSON stays text."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _unwrap_mcp_text(value: Any) -> Any:
    """An MCP result's single text content that is itself JSON, shown as that JSON."""
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
            text = content[0].get("text")
            if isinstance(text, str):
                return {**value, "content": [{**content[0], "text": parse_json_text(text)}]}
    return value


def pretty(value: Any) -> str:
    """Indented JSON for a value; strings are shown as they are."""
    value = _unwrap_mcp_text(parse_json_text(value))
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


@dataclass(frozen=True)
class Payload:
    """One attribute prepared for display: text, size, whether it starts collapsed."""

    key: str
    text: str
    size: int
    collapsed: bool

    @property
    def preview(self) -> str:
        """The first characters on one line, for the collapsed summary."""
        flat = " ".join(self.text[: PREVIEW_CHARS * 2].split())
        return flat[:PREVIEW_CHARS] + ("…" if len(flat) > PREVIEW_CHARS else "")


def payload(key: str, value: Any, collapse_above: int = COLLAPSE_ABOVE) -> Payload:
    """`value` pretty-printed, with its size, collapsed when large."""
    text = pretty(value)
    size = len(text.encode("utf-8", "replace"))
    return Payload(key=key, text=text, size=size, collapsed=size > collapse_above)
