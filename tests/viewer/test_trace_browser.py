"""The trace page as a person triaging a run uses it, in Debian's Chromium (Playwright): bars
where their time is (measured), a failing predicate's span link that opens and highlights the
span, and a live run read while it grows. One browser for the module; screenshots land in the
test's tmp path for review."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

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
