"""The triage journey in a real Chromium: from the home page to the failing run of an
experiment, through the runs list filtered to failed runs, reading each run's verdict and reason
on the way. The trace page itself is tested by tests/viewer/test_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.viewer.conftest import NightServer
from tests.viewer.test_browser import (  # noqa: F401 (fixtures: one browser for the module)
    CHROMIUM,
    Watched,
    browser_context,
    watched,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]


def test_triage_a_failed_experiment_from_the_home_page_to_the_failing_run(
    night_server: NightServer,
    watched: Watched,  # noqa: F811
    tmp_path: Path,
) -> None:
    page, url, night = watched.page, night_server.url, night_server.night
    experiment = night.experiments["last-night"]

    page.goto(f"{url}/")
    page.get_by_role("link", name=experiment).click()
    page.wait_for_url(re.compile(rf"/experiments/{experiment}$"))
    page.get_by_role("link", name="all runs").click()
    page.wait_for_url(re.compile(rf"/runs\?experiment={experiment}"))
    assert page.locator(".runs-count").inner_text().startswith("20 runs")  # 4 tasks x 5 trials

    # Only the failed runs: the verdict filter, applied in place, kept in the URL.
    page.get_by_label("Verdict or status").select_option("failed")
    page.wait_for_url(re.compile(r"status=failed"))
    rows = page.locator("#runs-table tbody tr")
    expected = {
        run_id
        for (name, _task, _trial), run_id in night.runs.items()
        if name == "last-night"
        and any(c.passed is False for c in night.scores[run_id].components)
    }
    page.wait_for_function(
        f"document.querySelectorAll('#runs-table tbody tr').length === {len(expected)}"
    )
    assert {rows.nth(i).get_attribute("id") for i in range(rows.count())} == {
        f"run-{run_id}" for run_id in expected
    }
    count = page.locator(".runs-count").inner_text()
    assert count.startswith(f"{len(expected)} runs match") and "status: failed" in count
    # Every row says "failed" in the failure colour, never "finished" in green, and why.
    for i in range(rows.count()):
        word = rows.nth(i).locator(".verdict-word")
        assert word.inner_text() == "failed"
        color = word.evaluate("e => getComputedStyle(e).color")
        assert color == "rgb(180, 35, 24)"  # --fail, never the green of "finished"
        assert rows.nth(i).locator(".reason").inner_text().strip()
    wrong_amount = night.runs[("last-night", "refund-order", 1)]
    row = page.locator(f"#run-{wrong_amount}")
    reason = row.locator(".reason").inner_text()
    assert reason == "invocation: issue_refund: amount: not within 0.01 of 42.5, got 425", reason
    timed_out = night.runs[("last-night", "book-flight", 0)]
    assert "run did not end on its own (timed_out)" in page.locator(
        f"#run-{timed_out} .reason"
    ).inner_text()
    page.screenshot(path=str(tmp_path / "runs-failed.png"), full_page=True)

    # The failing run's trace page, from its row.
    row.get_by_role("link", name="refund-order").click()
    page.wait_for_url(re.compile(rf"/runs/{wrong_amount}$"))
    assert "refund-order" in page.locator("h1").inner_text()
    # the same verdict and reason at the top of the trace, the component linked to its evidence
    assert page.locator(".summary-line .verdict-word").inner_text() == "failed"
    said = page.locator(".verdict-reason").inner_text()
    assert said == "invocation: issue_refund: amount: not within 0.01 of 42.5, got 425", said
    page.screenshot(path=str(tmp_path / "trace.png"))
    watched.clean()  # no console error, no dialog
