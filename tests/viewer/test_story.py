"""The top of the trace page: the task in words and the transcript built from the trace."""

from __future__ import annotations

import html
import json
import re

from tests.scorers.test_model import ADD, agent_loop, model_span
from tests.scorers.trace_helpers import root
from tests.viewer.conftest import NightClient
from tracecard.traces import semconv as sc
from tracecard.viewer.conversation import build_model_view
from tracecard.viewer.payloads import readable_result


def _story_part(page: str) -> str:
    """The task and transcript column, as text (tags dropped)."""
    return re.sub(r"<[^>]+>", "", page[page.index('id="task-h"') : page.index('id="ev-h"')])


async def test_a_failed_run_states_the_task_and_what_the_agent_did(
    night_client: NightClient,
) -> None:
    night = night_client.night
    run = night.runs[("last-night", "refund-order", 1)]  # refunded 425 instead of 42.5
    page = (await night_client.client.get(f"/runs/{run}")).text
    story = html.unescape(_story_part(page))
    assert "Refund order A-1001 in full." in story
    assert "amount 42.5 ± 0.01" in story  # the expected call's matcher in words
    assert "$.structuredContent.refunded_amount approx 42.5 ± 0.01" in story
    assert 'the answer contains "refund issued"' in story
    # the agent's calls in order, with arguments and readable results (not the MCP envelope)
    lookup, refund = story.index("called lookup_order"), story.index("called issue_refund")
    assert lookup < refund and '"amount": 425' in story and '"refund_id": "R-2"' in story
    assert '"content"' not in story
    # the probe is a check by tracecard, after the agent's calls, never "called get_order"
    checks = story.index("Checks tracecard ran")
    assert checks > refund and "check order" in story[checks:] and "called get_order" not in story
    assert f'href="#span-{night.spans[run][1]}"' in page  # each entry links to its span


async def test_an_ad_hoc_run_is_not_offered_the_verdict_form(night_client: NightClient) -> None:
    page = (await night_client.client.get(f"/runs/{night_client.night.live_run}")).text
    assert "verdict-form" not in page and "Scored when the run ends." in page
    scored = night_client.night.runs[("last-night", "weather", 0)]
    assert "verdict-form" in (await night_client.client.get(f"/runs/{scored}")).text


def test_model_errors_are_errors_and_cut_text_is_marked() -> None:
    failed = model_span(text="```json", start_ms=400)
    failed["attributes"][sc.ERROR_TYPE] = "server_error"
    del failed["attributes"][sc.GEN_AI_USAGE_INPUT_TOKENS]
    view = build_model_view([*agent_loop(), failed])
    assert view is not None and view.usage.errors == 1
    last = view.transcript[-2:]
    assert last[0].text == "```json" and last[0].cut.startswith("cut off: the request failed")
    assert last[1].kind == "model_error" and "server_error" in last[1].text
    # ids stay as recorded: a mixed-case id is not upper-cased anywhere
    mixed = model_span(calls=[{**ADD, "id": "rHDA63mYD8"}])
    view = build_model_view([root(), mixed])
    assert view is not None and view.transcript[1].call_id == "rHDA63mYD8"


def test_results_are_unwrapped_and_images_are_images() -> None:
    pixel = (  # a 1x1 PNG
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
        "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    result = {
        "content": [
            {"type": "text", "text": json.dumps({"ok": True})},
            {"type": "image", "mimeType": "image/png", "data": pixel},
            {"type": "image", "mimeType": "image/svg+xml", "data": pixel},  # never drawn
            {"type": "image", "mimeType": "image/png", "data": "not base64!"},
        ],
        "isError": False,
    }
    readable = readable_result(json.dumps(result))
    assert readable.text.startswith('{"ok": true}')
    assert [i.mime for i in readable.images] == ["image/png"]
    assert readable.images[0].src == f"data:image/png;base64,{pixel}"
    cut = json.dumps(result)[:50] + "…[truncated by tracecard: original size 307200 bytes]"
    assert readable_result(cut).cut_from == 307200


def _rows(page: str, anchor: str) -> list[list[str]]:
    """The rows of one evidence table, as cell texts."""
    block = page[page.index(f'id="{anchor}"') :].split("</table>", 1)[0]
    rows = re.findall(r"<tr class=\"(ok|bad|na)\">(.*?)</tr>", block, re.S)
    return [
        [state]
        + [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)
        ]
        for state, cells in rows
    ]


async def test_evidence_reads_as_expected_against_observed(night_client: NightClient) -> None:
    night = night_client.night
    run = night.runs[("last-night", "refund-order", 1)]  # refunded 425 instead of 42.5
    page = (await night_client.client.get(f"/runs/{run}")).text
    refund_span = night.spans[run][1]
    # invocation: the expected refund is missing; its closest call differs in the amount only
    invocation = _rows(page, "ev-invocation-1")
    assert ["ok", "order_id", '= "A-1001"', "A-1001", "✓"] in invocation
    amount = next(r for r in invocation if r[1] == "amount")
    assert amount[:4] == ["bad", "amount", "42.5 ± 0.01", "425"] and "✗" in amount[4]
    block = page[page.index('id="ev-invocation-1"') :].split("</table>", 1)[0]
    assert "missing (closest call shown)" in block and f'href="#span-{refund_span}"' in block
    # outcome: the predicate that failed, with what was expected and what the probe saw
    outcome = _rows(page, "ev-outcome-0")
    failing = next(r for r in outcome if r[0] == "bad")
    assert failing[1:4] == ["order · $.structuredContent.refunded_amount", "approx 42.5", "425"]
    held = next(r for r in outcome if r[0] == "ok")
    assert held[1:4] == ["order · $.structuredContent.refunded", "eq true", "true"]
    assert "raw JSON" in page  # the stored JSON, one click away


async def test_a_timed_out_run_shows_its_budget_and_its_error(night_client: NightClient) -> None:
    night = night_client.night
    run = night.runs[("last-night", "book-flight", 0)]
    page = (await night_client.client.get(f"/runs/{run}")).text
    assert "run did not end on its own (status timed_out)" in page
    errors = _rows(page, "ev-efficiency-1")
    assert errors[0][:3] == ["bad", "timeout", "no"]
    assert f'href="#span-{night.spans[run][0]}"' in page.split('id="ev-efficiency-1"')[1]


async def test_root_span_evaluation_events_are_decoded(night_client: NightClient) -> None:
    night = night_client.night
    run = night.runs[("last-night", "refund-order", 1)]
    root = (await night_client.client.get("/api/runs/" + run)).json()["root_span_id"]
    detail = html.unescape((await night_client.client.get(f"/runs/{run}/spans/{root}")).text)
    assert "gen_ai.evaluation.result" in detail
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", detail)  # not nanoseconds
    assert '"order": "subsequence"' in detail  # the explanation's JSON, decoded and indented
