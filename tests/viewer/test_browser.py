"""The viewer in a real browser: Debian's Chromium driven by Playwright, against a real server.

Screenshots of every page land in test-artifacts/screenshots/ (git-ignored) for a person to look
at. No browser is ever downloaded: without /usr/bin/chromium these tests are skipped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import ROOT
from tests.viewer.conftest import NightServer
from tests.viewer.data import SCRIPTS, tool_span

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "test-artifacts" / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)",
    ),
]


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1360, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


class Watched:
    """A page whose dialogs, console errors and uncaught exceptions are recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def clean(self) -> None:
        assert self.dialogs == [], self.dialogs
        assert self.errors == [], self.errors
        assert self.page.evaluate("window.__pwned") is None


@pytest.fixture
def watched(browser_context: Any) -> Iterator[Watched]:
    page = browser_context.new_page()
    try:
        yield Watched(page)
    finally:
        page.close()


def test_a_morning_after_a_night_of_runs(night_server: NightServer, watched: Watched) -> None:
    page, url, night = watched.page, night_server.url, night_server.night
    page.goto(f"{url}/experiments")
    watched.shot("01-experiments")
    page.get_by_role("link", name=night.experiments["last-night"]).click()
    page.wait_for_url(re.compile(r"/experiments/"))
    assert page.locator("table.matrix").get_by_text("⇄ flaky").count() >= 1
    watched.shot("02-experiment")

    # Filter the runs to failed outcomes: the table updates in place, the URL can be shared.
    page.get_by_role("link", name="all runs").click()
    page.wait_for_url(re.compile(r"/runs\?experiment="))
    page.evaluate("window.__sameDocument = true")
    page.get_by_label("Failed component").select_option("outcome")
    page.wait_for_url(re.compile(r"component=outcome"))
    page.wait_for_function("document.querySelectorAll('#runs-table tbody tr').length === 7")
    assert page.evaluate("window.__sameDocument") is True  # no reload: an htmx swap
    watched.shot("03-runs-failed-outcome")

    # Open the trace of the trial that refunded the wrong amount and expand the refund call.
    wrong = night.runs[("last-night", "refund-order", 1)]
    page.get_by_role("link", name=wrong).click()
    page.wait_for_url(re.compile(rf"/runs/{wrong}$"))
    call = page.locator(f"#span-{night.spans[wrong][1]}")
    call.locator("summary").focus()
    page.keyboard.press("Enter")  # keyboard-usable: a <details> summary
    detail = call.locator(".detail")
    detail.get_by_text('"amount": 425').wait_for()
    assert detail.get_by_text("Evidence citing this span").count() == 1
    # what the scorer said about this call, as the panel's expected-vs-observed table
    amount = detail.locator(".citing table.ev tr.bad:not(.note-row)").filter(has_text="amount")
    assert amount.count() == 1 and "42.5" in amount.inner_text() and "425" in amount.inner_text()
    assert detail.locator(".citing pre.json:visible").count() == 0  # raw JSON is one click away
    assert call.locator("summary .chip.ev").count() >= 1  # evidence beside the span it cites
    assert page.locator("svg.bar rect").count() == 5
    watched.shot("04-trace-call-expanded")

    # Five trials side by side: the divergence is marked.
    page.get_by_role("link", name="Compare the trials of this task").click()
    page.wait_for_url(re.compile(r"/compare/runs\?"))
    marker = page.locator("#divergence .marker")
    assert marker.inner_text().endswith("first divergence")
    assert page.locator("th.trial").count() == 5
    assert page.locator("mark.differs").filter(has_text="amount: 425").count() == 1
    watched.shot("05-compare-trials")

    # The evaluator said the hallucinated completion passed: record two verdicts.
    skipped = night.runs[("last-night", "refund-order", 3)]
    page.goto(f"{url}/runs/{skipped}")
    form = page.locator("form.verdict-form")
    form.get_by_label("Component").select_option("outcome")
    form.get_by_label("right").check()
    form.get_by_label("Your name").fill("ada")
    form.get_by_role("button", name="Record verdict").click()
    page.locator("#verdicts .agreement td.rate-outcome").filter(has_text="100%").wait_for()
    form = page.locator("form.verdict-form")
    form.get_by_label("Component").select_option("outcome")
    form.get_by_label("wrong").check()
    form.get_by_label("Note").fill("no refund: the probe read stale state")
    form.get_by_label("Your name").fill("bo")
    form.get_by_role("button", name="Record verdict").click()
    page.locator("#verdicts .agreement td.rate-outcome").filter(has_text="50%").wait_for()
    watched.shot("06-trace-verdicts")
    page.goto(f"{url}/experiments/{night.experiments['last-night']}")
    assert page.locator("#agreement td.rate-outcome").inner_text() == "50%"

    # Last night against last week: regressions first.
    page.get_by_role("link", name="Compare experiments").click()
    page.get_by_label("A (baseline)").select_option(night.experiments["last-week"])
    page.get_by_label("B (candidate)").select_option(night.experiments["last-night"])
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(r"/compare/experiments\?a="))
    first = page.locator("table.classes tbody tr").first
    assert "refund-order" in first.inner_text() and "regressed" in first.inner_text()
    assert page.locator(".verdict-box h2").inner_text() in ("undecided", "A better", "B better")
    watched.shot("07-compare-experiments")
    watched.clean()


def test_hostile_payloads_execute_nothing(night_server: NightServer, watched: Watched) -> None:
    page, night = watched.page, night_server.night
    run = night.hostile_run
    page.goto(f"{night_server.url}/runs/{run}")
    call = page.locator(f"#span-{night.spans[run][0]}")
    call.locator("summary").click()
    result = call.locator("details.payload").filter(has_text="gen_ai.tool.call.result")
    assert "KB" in result.locator(".size").inner_text()  # collapsed behind its size
    result.locator("summary").click()
    result.locator("pre").filter(has_text="AAAAAAAAAA").wait_for()
    assert "<script>window.__pwned=1</script>" in result.locator("pre").inner_text()
    assert page.locator("img").count() == 0 and page.locator("a[href^='javascript']").count() == 0
    page.wait_for_timeout(300)
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width  # a 200 KB single line does not widen the page
    watched.shot("08-hostile-payload")
    watched.clean()


def test_a_running_run_updates_without_reload(night_server: NightServer, watched: Watched) -> None:
    page, night, store = watched.page, night_server.night, night_server.store
    run = store.get_run(night.live_run)
    assert run is not None
    page.goto(f"{night_server.url}/runs/{run.id}")
    page.evaluate("window.__sameDocument = true")
    before = page.locator("li.span").count()
    start = time.time_ns()
    store.insert_spans([tool_span(run, SCRIPTS["refund.good"][1], start, run.root_span_id)])
    page.locator("li.span").nth(before).wait_for(timeout=8000)
    store.update_run(run.id, status="finished")
    page.locator(".live-dot").wait_for(state="detached", timeout=8000)
    assert page.locator("[hx-trigger='every 2s']").count() == 0  # polling stopped
    assert page.evaluate("window.__sameDocument") is True
    watched.shot("09-live-run-finished")
    watched.clean()


def test_narrow_screens_stay_readable(night_server: NightServer, browser_context: Any) -> None:
    page = browser_context.new_page()
    try:
        page.set_viewport_size({"width": 420, "height": 900})
        run = night_server.night.runs[("last-night", "refund-order", 2)]
        page.goto(f"{night_server.url}/runs/{run}")
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width
        page.screenshot(path=str(SHOTS / "10-trace-narrow.png"), full_page=True)
    finally:
        page.close()
