"""The trace page as a person triaging a run uses it, in Debian's Chromium (Playwright): bars
where their time is (measured), a failing predicate's span link that opens and highlights the
span, and a live run read while it grows. One browser for the module; screenshots land in the
test's tmp path for review."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from tests.support.processes import mcp_tool_server
from tests.support.proxy import new_run, tracecard_for
from tests.support.tracecard import RunningServer
from tests.viewer.conftest import NightServer
from tests.viewer.test_browser import ARGS, CHROMIUM, Watched

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def watched(browser: Any, tmp_path: Path) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    found = Watched(page)
    found.shot = lambda name: page.screenshot(path=str(shots / f"{name}.png"), full_page=True)  # type: ignore[method-assign]
    try:
        yield found
    finally:
        context.close()


def _spans(url: str, run_id: str) -> dict[str, dict[str, Any]]:
    spans = httpx.get(f"{url}/api/runs/{run_id}/spans", timeout=10).json()["spans"]
    return {s["span_id"]: s for s in spans}


@pytest.mark.parametrize(
    "key", [("last-night", "refund-order", 1), ("last-week", "book-flight", 0)]
)
def test_each_bar_sits_at_its_time(
    night_server: NightServer, watched: Watched, key: tuple[str, str, int]
) -> None:
    """Rows with chips (evidence, checks, errors) and rows without share one track: each bar's
    left edge and width are measured in the browser against the span's times."""
    page, run = watched.page, night_server.night.runs[key]
    spans = _spans(night_server.url, run)
    t0 = min(s["start_time_unix_nano"] for s in spans.values())
    t1 = max(s["end_time_unix_nano"] or s["start_time_unix_nano"] for s in spans.values())
    page.goto(f"{night_server.url}/runs/{run}")
    boxes = page.evaluate(
        """() => [...document.querySelectorAll('li.span')].map(li => {
            const svg = li.querySelector('svg.bar').getBoundingClientRect();
            const bar = li.querySelector('svg.bar rect').getBoundingClientRect();
            return {id: li.id.slice(5), track: [svg.left, svg.width], bar: [bar.left, bar.width],
                    chips: li.querySelectorAll('.chip').length};
        })"""
    )
    assert len(boxes) == len(spans) and any(b["chips"] for b in boxes)
    assert any(not b["chips"] for b in boxes)
    tracks = {tuple(round(v, 1) for v in b["track"]) for b in boxes}
    assert len(tracks) == 1, tracks  # one track for every row
    for box in boxes:
        span = spans[box["id"]]
        left, width = box["track"]
        start = span["start_time_unix_nano"]
        end = span["end_time_unix_nano"] or t1
        expected_left = left + width * (start - t0) / (t1 - t0)
        expected_width = max(width * (end - start) / (t1 - t0), width * 2 / 1000)
        assert abs(box["bar"][0] - expected_left) <= 2, (span["name"], box, expected_left)
        assert abs(box["bar"][1] - expected_width) <= 2, (span["name"], box, expected_width)
    watched.shot(f"bars-{key[1]}")
    watched.clean()


def test_the_failing_predicate_links_to_its_span(
    night_server: NightServer, watched: Watched
) -> None:
    """A failed run: the outcome predicate that failed shows what was expected and what the
    probe saw; its span link opens, highlights and scrolls to the probe's span."""
    page, night = watched.page, night_server.night
    run = night.runs[("last-night", "refund-order", 3)]  # said "refund issued", refunded nothing
    page.goto(f"{night_server.url}/runs/{run}")
    failing = page.locator("#ev-outcome table.ev tr.bad").first
    cells = failing.locator("td").all_inner_texts()
    assert cells[:3] == ["order · $.structuredContent.refunded", "eq true", "false"], cells
    link = failing.locator("a.cite")
    target = link.get_attribute("href")
    assert target is not None and target.startswith("#span-")
    link.click()
    span = page.locator(target)
    span.locator(".detail").get_by_text("probe observed").wait_for()  # opened, detail loaded
    assert page.evaluate("document.querySelector(':target').id") == target[1:]
    assert span.locator(":scope > details").evaluate("d => d.open") is True
    box = span.bounding_box()
    assert box is not None and 0 <= box["y"] <= 900  # scrolled into view
    row = span.locator(":scope > details > summary").inner_text()
    assert "check: get_order" in row  # tracecard's probe, named as a check, not the agent
    watched.shot("failing-predicate-span")
    # the same address pasted into a new tab opens the span too (a permalink)
    page.goto(f"{night_server.url}/runs/{run}{target}")
    page.locator(target).locator(".detail").get_by_text("probe observed").wait_for()
    watched.clean()


@pytest.fixture(scope="module")
def live_tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with mcp_tool_server("--stateless", "--json") as url:
        with tracecard_for({"tools": {"url": url}}, tmp_path_factory.mktemp("live")) as running:
            yield running


def _call(url: str, tool: str, arguments: dict[str, Any]) -> None:
    """One tool call by the official MCP client through tracecard's proxy."""

    async def call() -> None:
        async with Client(url) as client:
            await client.call_tool(tool, arguments)

    with ThreadPoolExecutor(1) as pool:  # its own event loop, beside Playwright's
        pool.submit(asyncio.run, call()).result(timeout=30)


SWAPS = """() => { window.__swaps = 0; window.__sameDocument = true;
    document.body.addEventListener('htmx:afterSettle', e => {
        if (e.detail.elt && e.detail.elt.id === 'trace-body') window.__swaps++; }); }"""


def test_read_a_live_run_while_it_grows(live_tracecard: RunningServer, watched: Watched) -> None:
    """Open a call's detail on a running run; while real proxied calls add spans over three
    refresh cycles, the detail stays open and loaded, the page keeps its scroll and focus; the
    refresh that sees the run end stops the polling."""
    page, base = watched.page, live_tracecard.url
    run = new_run(base, config={"name": "live-agent"})
    tools = run["urls"]["tools"]
    _call(tools, "add", {"a": 19, "b": 23})
    page.goto(f"{base}/runs/{run['id']}")
    page.evaluate(SWAPS)
    row = page.locator("li.span").filter(has_text="tools/call add")
    row.locator("summary").click()
    detail = row.locator(".detail")
    detail.get_by_text('"a": 19').wait_for()
    scroll = page.evaluate("() => { window.scrollTo(0, 400); return window.scrollY; }")
    before = page.locator("li.span").count()
    for cycle in range(1, 4):
        _call(tools, "echo", {"text": f"cycle {cycle}"})
        page.wait_for_function(f"() => window.__swaps >= {cycle}", timeout=15_000)
    page.wait_for_function(
        f"() => document.querySelectorAll('li.span').length > {before}", timeout=10_000
    )
    page.locator("li.span").filter(has_text="tools/call echo").first.wait_for()
    assert row.locator(":scope > details").evaluate("d => d.open") is True  # still open
    assert '"a": 19' in detail.inner_text()  # still loaded, not "loading…"
    assert page.evaluate("window.scrollY") == scroll
    assert page.evaluate("document.activeElement.closest('li.span') !== null")  # focus kept
    assert page.evaluate("window.__sameDocument") is True
    watched.shot("live-run-growing")

    live_requests: list[str] = []
    page.on("request", lambda r: live_requests.append(r.url) if "/live" in r.url else None)
    finished = httpx.post(f"{base}/api/runs/{run['id']}/finish", json={"final_answer": "42"})
    assert finished.status_code == 200, finished.text
    page.locator(".live-dot").wait_for(state="detached", timeout=10_000)
    seen = len(live_requests)
    page.wait_for_timeout(2_500)  # longer than one polling interval: no request may follow
    assert len(live_requests) == seen, live_requests
    assert row.locator(":scope > details").evaluate("d => d.open") is True
    watched.shot("live-run-ended")
    watched.clean()


def _otlp_spans(run: dict[str, Any], count: int, ticked: int) -> dict[str, Any]:
    """OTLP JSON of `count` agent spans in the run's trace, a millisecond apart; span `ticked`
    carries an event halfway through it."""
    t0 = time.time_ns()
    spans = []
    for n in range(count):
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
        if n == ticked:
            span["events"] = [{"name": "retry", "timeUnixNano": str(start + 400_000)}]
        spans.append(span)
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "long-agent"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def test_a_long_live_waterfall_loads_its_rows_on_demand(
    live_tracecard: RunningServer, watched: Watched
) -> None:
    """A live run of 700 spans: the page renders the first 300 rows; scrolling to the end
    loads the next ones, and the live refresh keeps them; a permalink to a later span loads the
    rows through it and opens it; an event of a span the page never read in full is ticked on
    its bar."""
    page, base = watched.page, live_tracecard.url
    run = new_run(base, config={"name": "long-agent"})
    sent = httpx.post(f"{base}/v1/traces", json=_otlp_spans(run, 700, 650), timeout=30)
    assert sent.status_code == 200, sent.text
    page.goto(f"{base}/runs/{run['id']}")
    page.evaluate(SWAPS)
    assert page.locator("li.span").count() == 300  # and the root? it has no span of its own
    page.locator("#more-rows").scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelectorAll('li.span').length === 600")
    page.wait_for_function("() => window.__swaps >= 2", timeout=15_000)  # two live refreshes
    assert page.locator("li.span").count() == 600  # the rows loaded stay
    late = f"{651:016x}"  # span 650
    page.evaluate(f"location.hash = '#span-{late}'")
    row = page.locator(f"#span-{late}")
    row.locator(".detail dl.facts").wait_for()  # opened, its detail loaded
    assert row.locator(":scope > details").evaluate("d => d.open") is True
    assert row.locator("svg.bar line.evt").count() == 1  # its event, on its bar
    assert page.locator("li.span").count() == 700
    assert page.locator("#more-rows").count() == 0
    watched.shot("long-waterfall-permalink")
    watched.clean()


def test_keys_copy_and_dark_mode(night_server: NightServer, browser: Any, tmp_path: Path) -> None:
    """j / k move between spans and Enter opens one; a copy button copies the span id as
    recorded; the page follows the reader's dark colour scheme."""
    context = browser.new_context(viewport={"width": 1360, "height": 900}, color_scheme="dark")
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        watched = Watched(context.new_page())
        page, night = watched.page, night_server.night
        run = night.runs[("last-night", "refund-order", 1)]
        refund = night.spans[run][1]
        page.goto(f"{night_server.url}/runs/{run}")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(17, 21, 28)", background  # the dark palette
        for _ in range(4):  # root, chat, lookup_order, issue_refund
            page.keyboard.press("j")
        assert page.evaluate("document.activeElement.closest('li.span').id") == f"span-{refund}"
        page.keyboard.press("k")
        page.keyboard.press("j")
        page.keyboard.press("Enter")
        call = page.locator(f"#span-{refund}")
        call.locator(".detail").get_by_text('"amount": 425').wait_for()
        call.locator(".detail dd button.copy").click()
        assert page.evaluate("navigator.clipboard.readText()") == refund
        page.screenshot(path=str(tmp_path / "trace-dark.png"), full_page=True)
        watched.clean()
    finally:
        context.close()
