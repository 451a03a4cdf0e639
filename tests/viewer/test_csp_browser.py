"""The trace page of a 5,000-span run under the viewer's Content-Security-Policy, in Debian's
Chromium: loading it, its rows 300 at a time from /runs/{id}/rows (scrolling, then a permalink
to a late span), opening a span's detail, the live refresh morphing the body and the run's end
must never make the browser refuse an inline style or script. Some spans carry markup in their
names, events and attributes (an agent's spans are untrusted input): escaped, it is text; let
through, the CSP would block it and this test fails. Violations are caught both ways Chromium
reports them: the console message ("Applying inline style violates ...") and the
`securitypolicyviolation` event.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.proxy import new_run, tracecard_for
from tests.support.tracecard import RunningServer
from tests.viewer.test_browser import ARGS, CHROMIUM, SHOTS
from tests.viewer.test_trace_browser import SWAPS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]

SPANS = 5_000
MARKUP = '<b style="color:red">x</b><style>body{display:none}</style>'
# collects every CSP violation the page reports, from before its first script runs
WATCH = """window.__csp = [];
document.addEventListener('securitypolicyviolation', e =>
    window.__csp.push(e.violatedDirective + ' ' + (e.sample || '') + ' ' + e.sourceFile));"""


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with tracecard_for({}, tmp_path_factory.mktemp("csp")) as running:
        yield running


def _otlp(run: dict[str, Any]) -> dict[str, Any]:
    """OTLP JSON of SPANS agent spans in the run's trace; every 50th has markup in its name, an
    event and an attribute."""
    t0 = time.time_ns()
    spans = []
    for n in range(SPANS):
        start = t0 + n * 1_000_000
        span: dict[str, Any] = {
            "traceId": run["trace_id"],
            "spanId": f"{n + 1:016x}",
            "parentSpanId": run["root_span_id"],
            "name": f"agent step {n}",
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 800_000),
        }
        if n % 50 == 0:
            span["name"] += MARKUP
            span["events"] = [{"name": MARKUP, "timeUnixNano": str(start + 400_000)}]
            span["attributes"] = [{"key": "note", "value": {"stringValue": MARKUP}}]
        spans.append(span)
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "long-agent"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def test_a_long_waterfall_loads_without_any_csp_violation(
    tracecard: RunningServer, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    base = tracecard.url
    run = new_run(base, config={"name": "long-agent"})
    sent = httpx.post(f"{base}/v1/traces", json=_otlp(run), timeout=60)
    assert sent.status_code == 200, sent.text
    console: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            page.add_init_script(WATCH)
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
            page.goto(f"{base}/runs/{run['id']}")
            assert page.locator("li.span").count() == 300
            page.evaluate(SWAPS)
            page.locator("#more-rows").scroll_into_view_if_needed()  # rows 300-599
            page.wait_for_function("() => document.querySelectorAll('li.span').length === 600")
            page.locator("li.span summary").nth(50).click()  # a span with markup: its detail
            page.locator("li.span").nth(50).locator(".detail dl.facts").wait_for()
            page.wait_for_function("() => window.__swaps >= 2", timeout=20_000)  # live morphs
            # the run ends: one last refresh, then the rest is read without polling (a live
            # morph of 5,000 rows every 2 s would only slow the test)
            finished = httpx.post(f"{base}/api/runs/{run['id']}/finish", json={}, timeout=60)
            assert finished.status_code == 200, finished.text
            page.locator(".live-dot").wait_for(state="detached", timeout=20_000)
            late = f"{4_951:016x}"  # a late span with markup: the rows through it load
            page.evaluate(f"location.hash = '#span-{late}'")
            page.locator(f"#span-{late} .detail dl.facts").wait_for(timeout=30_000)
            assert page.locator("li.span").count() >= 4_951
            assert MARKUP in page.locator(f"#span-{late} .name").inner_text()  # shown as text
            violations = page.evaluate("window.__csp")
            page.screenshot(path=str(SHOTS / "long-waterfall-csp.png"))
        finally:
            browser.close()
    assert violations == [], violations
    assert not [m for m in console if "Content Security Policy" in m], console
    assert not [m for m in console if m.startswith(("error", "pageerror"))], console
