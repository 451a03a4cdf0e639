"""`/schema`: the API drawn by Swagger UI from this origin only, under the viewer's CSP.

Litestar's own render plugins write an inline `<script>` and `<style>` and link a CDN favicon;
this one renders a viewer page that loads Swagger UI's bundle and stylesheet from the npm
package `swagger-ui-dist` (pinned in package-lock.json, shipped in the wheel like htmx, served
at /static/vendor/) and starts it from a static file. The OpenAPI document stays at
`/schema/openapi.json`.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Router
from litestar.openapi.plugins import OpenAPIRenderPlugin

from tracecard.viewer.assets import SECURITY_HEADERS
from tracecard.viewer.rendering import render_html

__all__ = ["SchemaPage", "schema_router"]


class SchemaPage(OpenAPIRenderPlugin):
    """The `/schema` page (and `/schema/swagger`)."""

    def __init__(self) -> None:
        super().__init__(path=["/", "/swagger"], favicon="", style="")

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        """The page: Swagger UI pointed at this app's OpenAPI document."""
        url = self.get_openapi_json_route(request)
        return render_html("schema.html", scripts=False, openapi_url=url).encode()


def schema_router(path: str = "/schema") -> Router:
    """The router Litestar fills with the schema routes: every response carries the viewer's
    security headers (the CSP among them)."""
    return Router(
        path, route_handlers=[], include_in_schema=False, response_headers=SECURITY_HEADERS
    )
