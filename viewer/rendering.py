"""Jinja rendering with autoescape on, display filters, and responses that carry the CSP."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Request, Response
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.exceptions import HTTPException

from tracecard.viewer.assets import SECURITY_HEADERS, htmx_missing_message, missing_vendor_file
from tracecard.viewer.payloads import human_size

TEMPLATES: Final = Path(__file__).parent / "templates"
HTMX_CONFIG: Final = '{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}'


def duration(nanoseconds: int | float | None) -> str:
    """A span duration for people: 840 µs, 340 ms, 1.24 s, 2 min 3 s."""
    if nanoseconds is None:
        return "—"
    ms = nanoseconds / 1e6
    if ms < 1:
        return f"{nanoseconds / 1e3:.0f} µs"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    return f"{int(ms // 60_000)} min {int(ms % 60_000 // 1000)} s"


def percent(value: float | None, digits: int = 0) -> str:
    """0.6 -> "60%"; None (not evaluated) -> "—", never 0%."""
    return "—" if value is None else f"{value * 100:.{digits}f}%"


def number(value: float | None, digits: int = 2) -> str:
    """A score value, or "—" when not evaluated."""
    return "—" if value is None else f"{value:.{digits}f}"


def moment(value: datetime | None) -> str:
    """A UTC timestamp to the second."""
    if value is None:
        return "—"
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _environment() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        duration=duration, percent=percent, number=number, moment=moment, size=human_size
    )
    environment.globals.update(htmx_config=HTMX_CONFIG)
    return environment


ENGINE: Final = JinjaTemplateEngine.from_environment(_environment())


def render_html(template: str, **context: Any) -> str:
    """The template rendered to text (autoescaped: tool payloads are hostile input)."""
    return ENGINE.get_template(template).render(**context)


def html_response(body: str, status_code: int = 200) -> Response[str]:
    """An HTML response with the viewer's security headers."""
    return Response(
        body,
        status_code=status_code,
        media_type="text/html; charset=utf-8",
        headers=dict(SECURITY_HEADERS),
    )


def page_response(body: str) -> Response[str]:
    """A rendered full page; a page error naming `scripts/setup` when htmx is not installed."""
    missing = missing_vendor_file()
    if missing is not None:
        return error_page(503, htmx_missing_message(missing))
    return html_response(body)


def error_page(status_code: int, message: str) -> Response[str]:
    """A readable error page (it works without htmx: it loads no script)."""
    return html_response(
        render_html("error.html", status_code=status_code, message=message, scripts=False),
        status_code,
    )


def viewer_error(_request: Request[Any, Any, Any], exc: Exception) -> Response[str]:
    """Errors on viewer pages are pages, not JSON."""
    if isinstance(exc, HTTPException):
        return error_page(exc.status_code, str(exc.detail))
    return error_page(500, f"internal error: {type(exc).__name__}: {exc}")
