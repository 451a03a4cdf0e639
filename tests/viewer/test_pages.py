"""Viewer pages over real HTTP: content, filters in the URL, escaping, CSP, errors, verdicts."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx
import pytest
from litestar.testing import AsyncTestClient

from tests.viewer.conftest import NightClient
from tests.viewer.data import HOSTILE_RESULT
from tracecard import viewer
from tracecard.viewer.assets import CSP


async def get(viewer: NightClient, path: str, **headers: str) -> httpx.Response:
    return await viewer.client.get(path, headers=headers)


def pages(server: NightClient) -> list[str]:
    night = server.night
    a, b = night.experiments["last-week"], night.experiments["last-night"]
    run = night.runs[("last-night", "refund-order", 1)]
    call = night.spans[run][1]
    return [
        "/",
        "/experiments",
        f"/experiments/{b}",
        "/runs",
        "/runs?component=outcome",
        "/runs/options",
        f"/runs/{run}",
        f"/runs/{night.live_run}/live",
        f"/runs/{run}/row",
        f"/runs/{run}/spans/{call}",
        f"/compare/runs?experiment={b}&task=refund-order",
        f"/compare/runs?run={run}&run={night.runs[('last-night', 'refund-order', 0)]}",
        f"/compare/experiments?a={a}&b={b}",
        "/compare/experiments",
        "/static/tracecard.css",
        "/static/vendor/htmx.min.js",
        "/static/vendor/idiomorph-ext.min.js",
        "/static/tracecard.js",
        *MISSING,
    ]


# The only scripts a page loads: htmx, its morph extension (idiomorph), the viewer's own.
SCRIPTS = (
    "/static/vendor/htmx.min.js",
    "/static/vendor/idiomorph-ext.min.js",
    "/static/tracecard.js",
)
# Errors are pages with the same headers; these, and only these, answer 404.
MISSING = ("/runs/nope", "/experiments/nope")


def test_the_viewer_router_mounts_at_the_root() -> None:
    assert viewer.viewer_router().path == "/"


async def test_every_viewer_response_sends_the_strict_csp(night_client: NightClient) -> None:
    for path in pages(night_client):
        response = await get(night_client, path)
        expected = 404 if path in MISSING else 200
        assert response.status_code == expected, (path, response.status_code, response.text)
        assert response.headers["content-security-policy"] == CSP, path
        assert response.headers["x-content-type-options"] == "nosniff", path
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


class _Elements(HTMLParser):
    """Every start tag with its attributes, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.tags


async def test_pages_have_no_inline_script_or_style(night_client: NightClient) -> None:
    for path in pages(night_client):
        if path.startswith("/static"):
            continue
        for tag, attrs in elements((await get(night_client, path)).text):
            assert tag != "style", path
            assert tag != "script" or attrs.get("src") in SCRIPTS, path
            assert "style" not in attrs, (path, tag)
            assert not [a for a in attrs if a.startswith("on")], (path, tag, attrs)
            assert not (attrs.get("href") or "").lower().startswith("javascript:"), path
    html = (await get(night_client, "/runs")).text
    assert '<script src="/static/vendor/htmx.min.js" defer></script>' in html
    assert 'name="htmx-config"' in html and "&#34;allowEval&#34;:false" in html


async def test_experiment_page_shows_the_matrix_flags_exports_and_agreement(
    night_client: NightClient,
) -> None:
    experiment = night_client.night.experiments["last-night"]
    html = (await get(night_client, f"/experiments/{experiment}")).text
    assert "refund-order" in html and "⇄ flaky" in html
    assert "pass@5" in html and "pass^5" in html and "95% CI" in html
    for ext in ("json", "csv", "md", "junit"):
        assert f"/api/experiments/{experiment}/scorecard.{ext}" in html
    # the footer names each statistic of the vocabulary, the headline first
    rows = re.findall(r'<tr class="summary" data-summary="([^"]+)"', html)
    assert rows == ["pass_rate", "mean", "pass@k", "pass^k", "flip"]
    assert "hallucinated completion" in html
    assert "Agreement with people" in html


async def test_runs_filters_live_in_the_url_and_the_table_updates_alone(
    night_client: NightClient,
) -> None:
    experiment = night_client.night.experiments["last-night"]
    url = f"/runs?experiment={experiment}&component=outcome"
    full = (await get(night_client, url)).text
    assert "<html" in full and 'value="outcome" selected' in full
    fragment = (
        await get(night_client, url, **{"HX-Request": "true", "HX-Target": "runs-table"})
    ).text
    assert fragment.startswith('<div id="runs-table"') and "<html" not in fragment
    assert fragment.count('<tr id="run-') == 7  # 2 refund-order + 5 book-flight trials


async def test_runs_pages_follow_the_cursor(night_client: NightClient) -> None:
    seen: list[str] = []
    url: str | None = "/runs?limit=20"
    for _ in range(5):
        html = (await get(night_client, url)).text
        seen += re.findall(r'<tr id="run-([0-9a-f]+)"', html)
        found = re.search(r'href="(/runs\?[^"]*cursor=[^"]+)"', html)
        url = found.group(1).replace("&amp;", "&") if found else None
        if url is None:
            break
        assert "limit=20" in url
    assert len(seen) == len(set(seen)) == 42  # 40 trials, the hostile run, the live run
    assert "First page" in html and "<strong>42 runs</strong>" in html


async def test_hostile_payloads_are_escaped_text(night_client: NightClient) -> None:
    run = night_client.night.hostile_run
    call = night_client.night.spans[run][0]
    page = (await get(night_client, f"/runs/{run}")).text
    detail = (await get(night_client, f"/runs/{run}/spans/{call}")).text
    trials = (await get(night_client, f"/compare/runs?run={run}&run={run}")).text
    for html in (page, detail, trials):
        assert "<script>window" not in html and "<img src=x" not in html
        assert "<b onmouseover" not in html and 'href="javascript:' not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in detail
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in trials  # the result's preview
    assert '<details class="payload"' in detail and "KB</span>" in detail  # collapsed, sized
    full = await get(night_client, f"/runs/{run}/spans/{call}/payload?key=gen_ai.tool.call.result")
    assert "&lt;img src=x onerror=" in full.text and len(full.text) > len(HOSTILE_RESULT)


async def test_missing_pages_are_pages(night_client: NightClient) -> None:
    response = await get(night_client, "/runs/nope")
    assert response.status_code == 404 and "text/html" in response.headers["content-type"]
    assert "no run with id" in response.text
    assert (await get(night_client, "/static/../../pyproject.toml")).status_code == 404
    assert (await get(night_client, "/static/secret.txt")).status_code == 404


async def form_token(browser: AsyncTestClient, run: str) -> str:  # type: ignore[type-arg]
    """The verdict form's CSRF token, as the trace page gives it (with its cookie)."""
    page = await browser.get(f"/runs/{run}")
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    assert found is not None and "tracecard_csrf" in browser.cookies
    return found.group(1)


async def test_verdict_is_stored_and_agreement_changes(night_client: NightClient) -> None:
    night, browser = night_client.night, night_client.client
    run = night.runs[("last-week", "list-files", 1)]
    before = await get(night_client, f"/experiments/{night.experiments['last-week']}")
    assert "No verdicts yet" in before.text
    token = await form_token(browser, run)
    form = {"component": "safety", "agree": "no", "note": "<i>path was fine</i>"}
    response = await browser.post(
        f"/runs/{run}/verdicts",
        data={**form, "csrf_token": token},
        headers={"HX-Request": "true", "Origin": night_client.url},
    )
    assert response.status_code == 200
    assert "&lt;i&gt;path was fine&lt;/i&gt;" in response.text and "0%" in response.text
    after = (await get(night_client, f"/experiments/{night.experiments['last-week']}")).text
    assert re.search(r'rate-safety">0%', after)


async def test_cross_site_and_tokenless_verdict_posts_are_refused(
    night_client: NightClient,
) -> None:
    run = night_client.night.runs[("last-week", "weather", 0)]
    browser = night_client.client
    token = await form_token(browser, run)
    answers = [
        await browser.post(
            f"/runs/{run}/verdicts",
            data={"component": "outcome", "agree": "yes", "csrf_token": token},
            headers={"Origin": "https://evil.example"},
        ),
        await browser.post(f"/runs/{run}/verdicts", data={"component": "outcome", "agree": "yes"}),
    ]
    cookies = dict(browser.cookies)
    browser.cookies.clear()  # a valid token without the browser's cookie (another browser)
    answers.append(
        await browser.post(
            f"/runs/{run}/verdicts",
            data={"component": "outcome", "agree": "yes", "csrf_token": token},
        )
    )
    browser.cookies.update(cookies)
    assert [a.status_code for a in answers] == [403, 403, 403]
    assert "reload the page" in answers[1].json()["detail"]
    assert '<ul class="verdicts">' not in (await browser.get(f"/runs/{run}")).text
    bad = await browser.post(
        f"/runs/{run}/verdicts", data={"component": "outcome", "csrf_token": token}
    )
    assert bad.status_code == 400 and "agree" in bad.text


@pytest.mark.parametrize("missing", ["/nonexistent/htmx.min.js"])
async def test_a_clear_page_error_when_htmx_is_missing(
    night_client: NightClient, monkeypatch, missing
) -> None:
    monkeypatch.setenv("TRACECARD_HTMX_JS", missing)
    response = await get(night_client, "/runs")
    assert response.status_code == 503 and "scripts/setup" in response.text
    assert response.headers["content-security-policy"] == CSP
    assert (await get(night_client, "/static/vendor/htmx.min.js")).status_code == 404


async def test_only_runs_in_progress_poll(night_client: NightClient) -> None:
    night = night_client.night
    live = (await get(night_client, f"/runs/{night.live_run}")).text
    done = (await get(night_client, f"/runs/{night.runs[('last-week', 'weather', 0)]}")).text
    assert 'hx-trigger="every 2s"' in live and 'hx-trigger="every 2s"' not in done
    assert 'hx-ext="morph" hx-swap="morph"' in live  # morphed in: what is open stays open
    # the refresh that finds the run ended answers 286: htmx stops polling (and still swaps)
    ended = await get(night_client, f"/runs/{night.runs[('last-week', 'weather', 0)]}/live")
    assert ended.status_code == 286 and 'hx-trigger="every 2s"' not in ended.text
    assert (await get(night_client, f"/runs/{night.live_run}/live")).status_code == 200
    rows = (await get(night_client, "/runs")).text
    assert rows.count('hx-trigger="every 2s"') == 1


async def test_a_runs_start_is_a_day_and_a_time_that_never_split(night_client: NightClient) -> None:
    """The start cell read "2026-12-03 / 17:00:55 / UTC" on up to four lines in a narrow column:
    it is the day, then the time, each kept whole (td.when span), UTC said once in the header."""
    html = (await get(night_client, "/runs")).text
    assert "Started (UTC)" in html
    cells = re.findall(
        r'<td class="num when" title="(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC">'
        r"<span>(\d{4}-\d\d-\d\d)</span> <span>(\d\d:\d\d:\d\d)</span></td>",
        html,
    )
    assert len(cells) == 42
    assert all(full == f"{day} {clock}" for full, day, clock in cells)
