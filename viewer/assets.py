"""Static assets and security headers: the stylesheet, htmx and Swagger UI from their npm
packages, the CSP."""

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
# Third-party files the viewer serves, by name under /static/vendor/: each from its npm package
# (pinned in package-lock.json), or the copy the wheel's build put beside the package.
VENDOR_FILES: Final = {
    "htmx.min.js": "htmx.org/dist/htmx.min.js",
    "idiomorph-ext.min.js": "idiomorph/dist/idiomorph-ext.min.js",  # live trace refresh (morph)
    "swagger-ui-bundle.js": "swagger-ui-dist/swagger-ui-bundle.js",  # the /schema page
    "swagger-ui.css": "swagger-ui-dist/swagger-ui.css",
}

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
_OWN_FILES: Final = {  # the viewer's own static files, and their media types
    "tracecard.css": "text/css; charset=utf-8",
    "schema.js": "text/javascript; charset=utf-8",  # starts Swagger UI on /schema
    "tracecard.js": "text/javascript; charset=utf-8",  # the trace page: morph, keys, copy
}
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


def vendor_path(name: str) -> Path | None:
    """A vendored file by name: node_modules in a checkout, else the wheel's copy (htmx also
    honours `$TRACECARD_HTMX_JS`)."""
    if name == "htmx.min.js":
        return htmx_path()
    candidates = [REPO_ROOT / "node_modules" / VENDOR_FILES[name], STATIC_DIR / "vendor" / name]
    return next((p for p in candidates if p.is_file()), None)


def missing_vendor_file() -> str | None:
    """The first vendored script the pages need that cannot be found, or None."""
    if htmx_path() is None:
        return "htmx.min.js"
    return None if vendor_path("idiomorph-ext.min.js") is not None else "idiomorph-ext.min.js"


def htmx_missing_message(name: str = "htmx.min.js") -> str:
    """What a person must do when htmx (or its morph extension) cannot be found."""
    if name != "htmx.min.js":
        return (
            f"{name} is missing: the viewer serves node_modules/{VENDOR_FILES[name]}, which "
            "`scripts/setup` installs from npm (package-lock.json pins it). Run scripts/setup."
        )
    return (
        "htmx is missing: the viewer serves node_modules/htmx.org/dist/htmx.min.js, which "
        "`scripts/setup` installs from npm (package-lock.json pins it). Run scripts/setup, or "
        f"point ${HTMX_ENV} at an htmx.min.js."
    )


@get("/static/vendor/{name:str}", include_in_schema=False, sync_to_thread=False)
def vendor_file(name: str) -> Response[bytes]:
    """htmx and Swagger UI, served from their npm packages (never from a CDN, never copied into
    the repo); a fixed allow-list, so no path from the URL reaches the disk."""
    if name not in VENDOR_FILES:
        raise NotFoundException(f"no vendored file {name!r}")
    path = vendor_path(name)
    if path is None:
        package = VENDOR_FILES[name].split("/", 1)[0]
        raise NotFoundException(
            htmx_missing_message()
            if name == "htmx.min.js"
            else f"{name} is missing: the viewer serves node_modules/{VENDOR_FILES[name]}, which "
            f"`scripts/setup` installs from npm ({package}, pinned in package-lock.json)"
        )
    media_type = "text/css" if name.endswith(".css") else "text/javascript"
    return Response(
        path.read_bytes(),
        media_type=f"{media_type}; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": _CACHE},
    )


@get("/static/{name:str}", include_in_schema=False, sync_to_thread=False)
def stylesheet(name: str) -> Response[bytes]:
    """The viewer's own static files (a fixed allow-list: no path from the URL reaches the
    disk)."""
    if name not in _OWN_FILES:
        raise NotFoundException(f"no static file {name!r}")
    return Response(
        (STATIC_DIR / name).read_bytes(),
        media_type=_OWN_FILES[name],
        headers={**SECURITY_HEADERS, "Cache-Control": _CACHE},
    )
