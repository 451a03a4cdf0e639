"""Tool payloads for display: JSON pretty-printed, sizes for people, large ones collapsed."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import orjson
from markupsafe import Markup

from tracecard.viewer.json_tree import json_tree

# Payloads longer than this are collapsed behind their size and fetched when opened.
COLLAPSE_ABOVE: Final = 4096
PREVIEW_CHARS: Final = 160
# The recorder's marker at the end of a payload it cut (server/recording/redaction.py).
TRUNCATION: Final = re.compile(r"…\[truncated by tracecard: original size (\d+) bytes\]\s*$")
# Image content shown as an image (CSP `img-src data:`); anything else is listed, never drawn.
IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
RESULT_TEXT_CHARS: Final = 4000  # characters of a result's text shown in the transcript


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


def _indented(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def fitted(value: Any, width: int = 100) -> str:
    """JSON on one line when it fits in `width` characters, else indented: a transcript of
    15 small calls reads in one screen, not five."""
    if isinstance(value, (dict, list)):
        try:
            line = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            return repr(value)
        if len(line) <= width:  # short: the standard library's spacing costs nothing here
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return _indented(value)


def pretty(value: Any) -> str:
    """Indented JSON for a value; strings are shown as they are."""
    return _indented(_unwrap_mcp_text(parse_json_text(value)))


def original_size(value: Any) -> int | None:
    """The size before the recorder cut it, for a payload stored truncated; else None."""
    if isinstance(value, str) and value.endswith("]"):
        found = TRUNCATION.search(value[-120:])
        if found:
            return int(found.group(1))
    return None


@dataclass(frozen=True)
class Image:
    """An MCP image content item, drawn as a `data:` image."""

    mime: str
    data: str  # base64, checked

    @property
    def src(self) -> str:
        return f"data:{self.mime};base64,{self.data}"

    @property
    def size(self) -> int:
        return len(self.data) * 3 // 4


def _image(item: dict[str, Any]) -> Image | None:
    mime, data = item.get("mimeType"), item.get("data")
    if mime not in IMAGE_TYPES or not isinstance(data, str) or not data:
        return None
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return Image(str(mime), data)


@dataclass
class Readable:
    """A tool result as a person reads it: its text, its images, whether the tool said error."""

    text: str = ""
    images: list[Image] = field(default_factory=list)
    is_error: bool = False
    cut_from: int | None = None  # original size in bytes, when the recorder cut it


def readable_result(raw: Any) -> Readable:
    """An MCP `CallToolResult` (or any payload) unwrapped: text items joined (JSON text shown
    as JSON), images as images, other content named; anything else pretty-printed."""
    found = Readable(cut_from=original_size(raw))
    value = parse_json_text(raw)
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        found.text = pretty(value)
    else:
        found.is_error = bool(value.get("isError"))
        texts = []
        for item in content:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "text" and isinstance(item.get("text"), str):
                texts.append(fitted(parse_json_text(item["text"])))
            elif kind == "image" and (image := _image(item)) is not None:
                found.images.append(image)
            elif kind == "resource" and isinstance(item.get("resource"), dict):
                texts.append(f"[resource {item['resource'].get('uri', '')}]")
            else:
                texts.append(f"[{kind} content]")
        if not texts and "structuredContent" in value:
            texts.append(fitted(value["structuredContent"]))
        found.text = "\n".join(texts)
    if len(found.text) > RESULT_TEXT_CHARS:
        found.text = f"{found.text[:RESULT_TEXT_CHARS]}… ({len(found.text)} characters)"
    return found


@dataclass(frozen=True)
class Payload:
    """One attribute prepared for display: text, size, whether it starts collapsed."""

    key: str
    text: str
    size: int
    collapsed: bool
    stored_from: int | None = None  # the original size, when the recorder cut the payload
    images: tuple[Image, ...] = ()
    tree: Markup | None = None  # the value as a collapsible tree (small payloads)

    @property
    def preview(self) -> str:
        """The first characters on one line, for the collapsed summary."""
        flat = " ".join(self.text[: PREVIEW_CHARS * 2].split())
        return flat[:PREVIEW_CHARS] + ("…" if len(flat) > PREVIEW_CHARS else "")


def payload(key: str, value: Any, collapse_above: int = COLLAPSE_ABOVE) -> Payload:
    """`value` pretty-printed, with its size, collapsed when large."""
    cut_from = original_size(value)
    images = tuple(readable_result(value).images) if _has_images(value) else ()
    shown = _unwrap_mcp_text(parse_json_text(_without_image_data(value) if images else value))
    text = _indented(shown)
    size = len(value.encode("utf-8", "replace")) if isinstance(value, str) else len(text)
    collapsed = size > collapse_above
    return Payload(
        key=key,
        text=text,
        size=size,
        collapsed=collapsed,
        stored_from=cut_from,
        images=images,
        tree=None if collapsed else json_tree(shown),
    )


def _has_images(value: Any) -> bool:
    return isinstance(value, str) and '"image"' in value[:200_000] and '"data"' in value


def _without_image_data(value: Any) -> Any:
    """The payload with each image's base64 replaced by its size: the image is drawn above."""
    parsed = parse_json_text(value)
    content = parsed.get("content") if isinstance(parsed, dict) else None
    if not isinstance(content, list):
        return value
    shown = [
        {**item, "data": f"[{human_size(len(item['data']) * 3 // 4)} image, shown above]"}
        if isinstance(item, dict)
        and item.get("type") == "image"
        and isinstance(item.get("data"), str)
        else item
        for item in content
    ]
    return {**parsed, "content": shown}


@dataclass(frozen=True)
class SpanEvent:
    """A span event for people: its name, its time in UTC, its attributes with JSON text
    decoded (an evaluation event's explanation is JSON inside JSON as stored)."""

    name: str
    at: str
    attributes: list[Payload]


def clock(ns: int | None) -> str:
    """Nanoseconds since the epoch as a UTC time to the millisecond."""
    if not ns:
        return "—"
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def span_event(event: dict[str, Any]) -> SpanEvent:
    """One stored span event, decoded for display."""
    attributes = event.get("attributes") if isinstance(event.get("attributes"), dict) else {}
    return SpanEvent(
        name=str(event.get("name") or "event"),
        at=clock(int(event.get("time_unix_nano") or 0)),
        attributes=[
            payload(str(key), value, collapse_above=10**9)  # no lazy fetch: not an attribute
            for key, value in sorted((attributes or {}).items())
        ],
    )
