"""No page loads anything from another origin (#18.9): every page of the viewer, and /schema,
visited in Chromium over a night of real runs, with every request the browser makes recorded
(and any to another origin refused). Each page must also carry the viewer's CSP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.viewer.conftest import NightServer
from tests.viewer.test_browser import CHROMIUM, Watched
from tests.viewer.test_browser import browser_context as browser_context  # one per module
from tracecard.viewer.assets import CSP

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium, /usr/bin/chromium"),
]


class Requests:
    """Every request the browser context makes; those to another origin are aborted."""

    def __init__(self, context: Any, origin: str) -> None:
        self.origin = origin
        self.made: list[str] = []
        self.elsewhere: list[str] = []
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        self.made.append(url)
        if url.startswith(("data:", "blob:")):
            route.continue_()
            return
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" != self.origin:
            self.elsewhere.append(url)
            route.abort()
            return
        route.continue_()


@pytest.fixture
def watched(browser_context: Any) -> Iterator[Watched]:
    page = browser_context.new_page()
    try:
        yield Watched(page)
    finally:
        page.close()


def test_no_page_requests_another_origin(
    night_server: NightServer, browser_context: Any, watched: Watched, tmp_path: Any
) -> None:
    url, night, page = night_server.url, night_server.night, watched.page
    requests = Requests(browser_context, url)
    last_night, last_week = night.experiments["last-night"], night.experiments["last-week"]
    failed = night.runs[("last-night", "refund-order", 1)]
    run = night_server.store.get_run(failed)
    assert run is not None and run.suite_version
    pages = {
        "home": "/",
        "experiments": "/experiments",
        "experiment": f"/experiments/{last_night}",
        "runs": "/runs",
        "runs-filtered": f"/runs?experiment={last_night}&component=outcome",
        "trace": f"/runs/{failed}",
        "trace-live": f"/runs/{night.live_run}",
        "compare-runs": f"/compare/runs?experiment={last_night}&task=refund-order",
        "compare-experiments-empty": "/compare/experiments",
        "compare-experiments": f"/compare/experiments?a={last_week}&b={last_night}",
        "suite-health": f"/suites/{run.suite_version}/health",
        "schema": "/schema",
    }
    try:
        for name, path in pages.items():
            response = page.goto(url + path)
            assert response is not None and response.status == 200, (name, path)
            assert response.headers.get("content-security-policy") == CSP, (name, path)
            page.wait_for_load_state("networkidle")
            if name == "trace":  # a call's detail is fetched by htmx when it is opened
                page.locator(f"#span-{night.spans[failed][1]} summary").first.click()
                page.locator(f"#span-{night.spans[failed][1]} .detail").first.wait_for()
            if name == "schema":  # Swagger UI draws the API, then an operation is opened
                page.locator(".opblock-summary").first.click()
                page.locator(".opblock-body").first.wait_for()
                page.wait_for_load_state("networkidle")
            page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
        print(f"\nscreenshots: {tmp_path}")
        assert requests.elsewhere == []
        assert any(u.endswith("/static/vendor/swagger-ui-bundle.js") for u in requests.made)
        assert any(u.endswith("/schema/openapi.json") for u in requests.made)
        assert len(requests.made) > len(pages)
        watched.clean()
    finally:
        browser_context.unroute("**/*")
