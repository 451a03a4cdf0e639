"""Static assets and security headers: the stylesheet, htmx from its npm package, the CSP."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from litestar import Response, get
from litestar.exceptions import NotFoundException

STATIC_DIR: Final = Path(__file__).parent / "static"
REPO_ROOT: Final = Path(__file__).resolve().parents[1]
HTMX_ENV: Final = "TRACECARD_HTMX_JS"
HTMX_URL: Final = "/static/vendor/htmx.min.js"

# Scripts only from the app itself, no inline script or style, no framing, no plugins.
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_STYLESHEETS: Final = {"tracecard.css"}
_CACHE = "public, max-age=300"


def htmx_path() -> Path | None:
    """htmx.min.js from `$TRACECARD_HTMX_JS`, else node_modules, else the Docker image's copy.

    An explicit `$TRACECARD_HTMX_JS` is the only candidate when set: a wrong path is an error
    to report, not a reason to serve some other htmx.
    """
    explicit = os.environ.get(HTMX_ENV)
    candidates = (
        [Path(explicit)]
        if explicit
        else [
            REPO_ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js",
            STATIC_DIR / "vendor" / "htmx.min.js",
        ]
    )
    return next((p for p in candidates if p.is_file()), None)


def htmx_missing_message() -> str:
    """What a person must do when htmx cannot be found."""
    return (
        "htmx is missing: the viewer serves node_modules/htmx.org/dist/htmx.min.js, which "
        "`scripts/setup` installs from npm (package-lock.json pins it). Run scripts/setup, or "
        f"point ${HTMX_ENV} at an htmx.min.js."
    )


@get(HTMX_URL, include_in_schema=False, sync_to_thread=False)
def htmx_script() -> Response[bytes]:
    """htmx, served from its npm package (never from a CDN, never copied into the repo)."""
    path = htmx_path()
    if path is None:
        raise NotFoundException(htmx_missing_message())
    return Response(
        path.read_bytes(),
        media_type="text/javascript; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": _CACHE},
    )


@get("/static/{name:str}", include_in_schema=False, sync_to_thread=False)
def stylesheet(name: str) -> Response[bytes]:
    """The viewer's own stylesheet (a fixed allow-list: no path from the URL reaches the disk)."""
    if name not in _STYLESHEETS:
        raise NotFoundException(f"no static file {name!r}")
    return Response(
        (STATIC_DIR / name).read_bytes(),
        media_type="text/css; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": _CACHE},
    )
