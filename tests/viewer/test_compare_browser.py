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
    # a preview longer than three lines is clamped by lines, which draws an ellipsis (a
    # max-height cut it mid-line with none): each shows whole lines only
    clamps = page.locator("table.compare div.result").evaluate_all(
        """els => els.map(e => [getComputedStyle(e).webkitLineClamp, e.clientHeight,
            parseFloat(getComputedStyle(e).lineHeight)])"""
    )
    assert clamps and all(c[0] == "3" for c in clamps), clamps
    assert all(abs(c[1] / c[2] - round(c[1] / c[2])) < 0.05 for c in clamps), clamps
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
    assert page.locator("tr.verdicts td").nth(2).locator(".small.muted").first.inner_text() == (
        "exports $.structuredContent.downloaded: expected eq true, got false"
    )
    people = page.locator("tr.verdicts td").nth(2).locator(".people .chip").all_inner_texts()
    assert people == ["ada: outcome right", "bo: completion wrong"]
    _shot(watched, served, "compare-trials-repeats")
    watched.clean()


def test_compare_two_experiments(served: Served, watched: Watched) -> None:
    page, ops = watched.page, served.ops
    baseline, candidate = ops.experiments["baseline"], ops.experiments["candidate"]
    # the empty page offers the newest experiment against the one before it, never itself
    page.goto(f"{served.url}/compare/experiments")
    assert page.get_by_label("A (baseline)").input_value() == baseline
    assert page.get_by_label("B (candidate)").input_value() == candidate
    page.get_by_role("button", name="Compare").click()
    page.locator(".verdict-box").wait_for()
    assert page.url.endswith(f"?a={baseline}&b={candidate}&component=outcome")
    # every component in one table, the headline's verdict box above
    heads = page.locator("table.components thead th.component").all_inner_texts()
    assert heads == ["invocation", "completion", "outcome", "safety", "efficiency"]
    rows = page.locator("table.components tbody tr")
    assert rows.count() == 4
    tasks = [rows.nth(i).locator("th").inner_text() for i in range(4)]
    # regressions first: export-report (outcome 100% -> 60%) and weather (safety 100% -> 60%)
    assert tasks[:2] == ["export-report", "weather"] and set(tasks[2:]) == {
        "list-files",
        "refund-order",
    }
    export = rows.nth(0).locator("td.cmp").nth(2)
    assert export.inner_text().split() == ["100%", "→", "60%", "regressed"]
    # weather passes outcome in both, but B raised 2 unsafe successes: side by side
    weather = rows.nth(1)
    assert weather.locator("td.cmp").nth(2).inner_text().split() == [
        "100%",
        "→",
        "100%",
        "both",
        "pass",
    ]
    assert weather.locator("td.cmp").nth(3).inner_text().split()[:3] == ["100%", "→", "60%"]
    assert weather.locator("td.flags").inner_text().strip() == "unsafe success 0 → 2"
    assert weather.locator("td.flags .chip.fail").count() == 1
    improved = rows.filter(has_text="list-files").locator("td.cmp").nth(2)
    assert improved.inner_text().split() == ["40%", "→", "100%", "improved"]
    # the verdict of each component under its column; the headline's in the box
    assert page.locator(".verdict-box h2").inner_text() == "undecided"  # 4 tasks: too few
    assert page.locator("table.components tfoot td strong").count() == 5
    # the chart: the outcome pass_rate of every task, one bar per side per task
    chart = page.locator("figure.chart svg").first
    assert chart.locator("rect.bar").count() == 8
    assert chart.locator("rect.side-a").count() == 4 and chart.locator("rect.side-b").count() == 4
    widths = chart.locator("rect.side-b").evaluate_all("rs => rs.map(r => r.getAttribute('width'))")
    assert widths[0] == "216.0"  # export-report: B 60% of 360 px, drawn first as in the table
    # over experiments: the outcome pass_rate of the three on this suite version, oldest first
    # (first-try: export 1/2, refund 2/2, files 0/2, weather 2/2 -> 62.5%)
    history = page.locator("figure.chart").nth(1)
    labels = history.locator("text.label").all_text_contents()
    assert [label.split(" ")[0] for label in labels] == ["first-try", "baseline", "candidate"]
    assert labels[1].endswith("(A)") and labels[2].endswith("(B)")
    titles = history.locator("rect.bar title").all_text_contents()
    assert [t.rsplit(" ", 1)[1] for t in titles] == ["62%", "85%", "90%"]
    _shot(watched, served, "compare-experiments")
    # comparing an experiment with itself is refused in words
    page.goto(f"{served.url}/compare/experiments?a={candidate}&b={candidate}")
    assert "same experiment" in page.get_by_role("alert").inner_text()
    assert page.locator(".verdict-box").count() == 0
    watched.clean()


def test_agreement_headers_break_between_words(served: Served, watched: Watched) -> None:
    """The agreement table sits in the trace page's narrow side panel: its headers may wrap
    between words, never inside one ("Agre e")."""
    page = watched.page
    page.goto(f"{served.url}/runs/{served.ops.runs[('candidate', 'export-report', 2)]}")
    table = page.locator("#verdicts table.agreement")
    assert table.locator("td.rate-outcome").inner_text() == "100%"
    for width in (1360, 420):
        page.set_viewport_size({"width": width, "height": 900})
        assert _words_broken(table) == [], width
    # the panel at its narrowest (a long scorer name, a narrow window): still whole words
    table.evaluate("t => { t.parentElement.parentElement.style.width = '230px'; }")
    assert _words_broken(table) == []
    panel = table.evaluate("t => [t.parentElement.clientWidth, t.parentElement.scrollWidth]")
    assert panel[0] <= 230  # too narrow for the table: it scrolls in its box, the page does not
    page.locator("#verdicts").screenshot(path=str(served.shots / "agreement-table-narrow.png"))
    watched.clean()


def _words_broken(table: Any) -> list[str]:
    """The header words that wrap inside themselves (their letters on two lines)."""
    return table.evaluate(  # type: ignore[no-any-return]
        """t => [...t.querySelectorAll('th')].flatMap(th => {
            const text = th.firstChild, words = [], range = document.createRange();
            let at = 0;
            for (const word of text.data.split(' ')) {
                range.setStart(text, at); range.setEnd(text, at + word.length);
                const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                if (lines.size > 1) words.push(word);
                at += word.length + 1;
            }
            return words;
        })"""
    )
