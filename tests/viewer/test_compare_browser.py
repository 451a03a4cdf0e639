"""The comparison pages as a person uses them, in Debian's Chromium driven by Playwright against
a real server over two experiments scored by the real scorers (`tests.viewer.compare_data`).

Journeys: compare 5 trials with repeats; compare two experiments. Screenshots are saved under
the module's tmp path (printed with `-s`) for a person to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.tracecard import running_tracecard
from tests.viewer.compare_data import POLLS, Ops, build_ops
from tests.viewer.test_browser import CHROMIUM, Watched
from tests.viewer.test_browser import browser_context as browser_context  # one per module
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium, /usr/bin/chromium"),
]


class Served:
    def __init__(self, url: str, ops: Ops, shots: Path) -> None:
        self.url, self.ops, self.shots = url, ops, shots


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("ops")
    url = f"sqlite:///{directory / 'tracecard.db'}"
    store = Store(url)
    store.create_schema()
    ops = build_ops(store)
    settings = Settings(db=url, sandbox_root=str(directory / "sandboxes"))
    shots = directory / "screenshots"
    shots.mkdir()
    print(f"\nscreenshots: {shots}")
    try:
        with running_tracecard(settings) as server:
            yield Served(server.url, ops, shots)
    finally:
        store.dispose()


@pytest.fixture
def watched(browser_context: Any) -> Iterator[Watched]:
    page = browser_context.new_page()
    try:
        yield Watched(page)
    finally:
        page.close()


def _shot(watched: Watched, served: Served, name: str) -> None:
    watched.page.screenshot(path=str(served.shots / f"{name}.png"), full_page=True)


def test_compare_five_trials_with_repeats(served: Served, watched: Watched) -> None:
    page, ops = watched.page, served.ops
    experiment = ops.experiments["candidate"]
    page.goto(f"{served.url}/experiments/{experiment}")
    page.goto(f"{served.url}/compare/runs?experiment={experiment}&task=export-report")
    # the breadcrumb names the experiment and the task
    crumbs = page.locator("p.crumbs")
    assert "candidate" in crumbs.inner_text() and "export-report" in crumbs.inner_text()
    assert crumbs.get_by_role("link", name="candidate").get_attribute("href") == (
        f"/experiments/{experiment}"
    )
    assert page.locator("th.trial").count() == 5
    steps = page.locator("table.compare tbody tr")
    # the model's turn, start_export, 3 polls every trial made, 11 more of trials 0, 1, 3 and 4
    # (the good ones' last poll saw "done"), the download (trial 2's failed one beside theirs)
    assert steps.count() == 5
    first = steps.nth(1)
    assert "start_export" in first.inner_text() and "×" not in first.inner_text()
    shared = steps.nth(2)
    assert shared.locator(".chip.repeat").all_inner_texts() == ["×3"] * 5
    assert "diverges" not in (shared.get_attribute("class") or "")
    # the first divergence: after the polls every trial made, where trial 2 stopped polling
    marker = page.locator("#divergence")
    assert marker.locator("th .marker").inner_text().endswith("first divergence")
    assert marker.locator("th").inner_text().startswith("4")
    assert page.locator(".divergence-note").inner_text() == (
        "The trials first diverge at step 4, after 5 calls every trial made alike."
    )
    cells = marker.locator("td")
    assert cells.nth(2).inner_text() == "—"  # trial 2 polled 3 times only
    repeats = [cells.nth(t).locator(".chip.repeat").inner_text() for t in (0, 1, 3, 4)]
    assert repeats == [f"×{POLLS - 3}"] * 4
    # a good trial's last poll read "done": the collapsed step shows it beside the first result
    assert '"state": "running"' in cells.nth(0).locator(".result").first.inner_text()
    assert '"state": "done"' in cells.nth(0).inner_text()
    # result previews read the MCP content, not its envelope
    assert '"content"' not in page.locator("table.compare tbody").inner_text()
    _shot(watched, served, "compare-trials-repeats")
    # the final answers and each trial's verdict, in one row each
    answers = page.locator("tr.answers td")
    assert answers.count() == 5
    assert answers.nth(4).inner_text() == "The export is still running; try again later."
    # (polling is redundant calls to the efficiency scorer: the good trials fail only there)
    verdicts = [v.split("\n")[0] for v in page.locator("tr.verdicts td").all_inner_texts()]
    assert verdicts == [
        "failed at efficiency",
        "failed at efficiency",
        "failed at outcome",
        "failed at efficiency",
        "failed at invocation",
    ]
    _shot(watched, served, "compare-trials-repeats")
    watched.clean()
