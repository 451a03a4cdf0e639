"""Only calls tracecard observed are calls in the viewer; the agent's own claims are marked.

A real pydantic-ai agent with its OpenTelemetry instrumentation exporting to tracecard makes one
MCP call through the proxy: the trace holds the proxy's `tools/call add` (evidence) and the
agent's own `execute_tool add` (stored as `tracecard.evidence = agent_reported`). The trials
comparison shows the call once per trial, as the scorers count it, and the trace page marks the
agent's span `agent-reported` (in process, and once in real Chromium).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from litestar.testing import AsyncTestClient

from tests.support.instrumented import instrumented_run
from tests.support.processes import mcp_tool_server
from tests.support.proxy import new_run, run_spans, settings_for, tracecard_for
from tests.viewer.conftest import IN_PROCESS_URL
from tracecard.server.app import asgi_app
from tracecard.traces.store import Store

CHROMIUM = Path("/usr/bin/chromium")
TITLE = "reported by the agent, not observed by tracecard: not used as evidence"


@dataclass
class Trials:
    url: str
    runs: list[dict[str, Any]]
    spans: dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trials]:
    folder = tmp_path_factory.mktemp("observed")
    with mcp_tool_server() as mcp, tracecard_for({"tools": {"url": mcp}}, folder) as server:
        runs = []
        for names_run in (True, False):  # joined by its run id, and by trace id only
            run = new_run(server.url, config={"name": "pydantic-ai"})
            asyncio.run(instrumented_run(server.url, run, names_run))
            finished = httpx.post(f"{server.url}/api/runs/{run['id']}/finish", json={}, timeout=60)
            assert finished.status_code == 200, finished.text
            runs.append(run)
        spans = {run["id"]: run_spans(server.url, run["id"]) for run in runs}
        yield Trials(url=server.url, runs=runs, spans=spans)


def _one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [s for s in spans if s["name"] == name]
    return found


def _row(page: str, span_id: str) -> str:
    match = re.search(rf'<li class="span [^"]*" id="span-{span_id}">.*?</li>', page, re.S)
    assert match is not None, span_id
    return match.group(0)


async def test_the_trials_comparison_shows_each_observed_call_once(trials: Trials) -> None:
    for spans in trials.spans.values():  # both spans of the one call are in each trace
        assert _one(spans, "execute_tool add")["attributes"]["tracecard.evidence"] == (
            "agent_reported"
        )
        assert _one(spans, "tools/call add")["attributes"]["tracecard.role"] == "agent"
    query = "&".join(f"run={run['id']}" for run in trials.runs)
    response = httpx.get(f"{trials.url}/compare/runs?{query}", timeout=30)
    assert response.status_code == 200, response.text
    page = response.text
    # one `add` cell per trial, linking to the proxy's span, never to the agent's own
    cells = re.findall(r'href="/runs/(\w+)#span-(\w+)">add</a>', page)
    assert sorted(cells) == sorted(
        (run["id"], _one(trials.spans[run["id"]], "tools/call add")["span_id"])
        for run in trials.runs
    )
    # model turn, the call, model turn: 3 steps per trial (4 when the agent's span counted)
    assert page.count('<div class="calls small muted">3 calls</div>') == 2
    assert "The trials first diverge" not in page
    assert "All trials made the same calls with the same arguments." in page


def _otlp(
    trace_id: str, parent: str, name: str, attributes: dict[str, str], run_id: str | None = None
) -> bytes:
    span = {
        "traceId": trace_id,
        "spanId": secrets.token_hex(8),
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    named = {"service.name": "my-agent", **({"tracecard.run.id": run_id} if run_id else {})}
    resource = {"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in named.items()]}
    scoped = {"resource": resource, "scopeSpans": [{"spans": [span]}]}
    return orjson.dumps({"resourceSpans": [scoped]})


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    settings = settings_for({}, tmp_path)
    store = Store(settings.db)
    store.create_schema()
    async with AsyncTestClient(asgi_app(settings, store), base_url=IN_PROCESS_URL) as client:
        yield client
    store.dispose()


async def test_the_waterfall_marks_agent_reported_spans(client: Any) -> None:
    """Real ingest marks the agent's `execute_tool` span; its row carries the chip with the
    reason, and the agent's other own span (a model turn, no claim) does not."""
    created = await client.post("/api/runs", json={"config": {"name": "otlp"}})
    assert created.status_code == 201, created.text
    run = created.json()
    claim = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add"}
    chat = {"gen_ai.operation.name": "chat"}
    for name, attributes in (("execute_tool add", claim), ("chat m", chat)):
        body = _otlp(run["trace_id"], run["root_span_id"], name, attributes, run["id"])
        posted = await client.post(
            "/v1/traces", content=body, headers={"content-type": "application/json"}
        )
        assert posted.status_code == 200, posted.text
    listed = await client.get(f"/api/runs/{run['id']}/spans")
    spans = listed.json()["spans"]
    page = (await client.get(f"/runs/{run['id']}")).text
    reported = _row(page, _one(spans, "execute_tool add")["span_id"])
    assert f'<span class="chip reported" title="{TITLE}">agent-reported</span>' in reported
    assert "my-agent" in reported  # still marked with the agent's service name too
    assert "agent-reported" not in _row(page, _one(spans, "chat m")["span_id"])
    assert page.count("agent-reported</span>") == 1
    # the runs table's tool filter: the agent's claim names `add`, tracecard observed no call
    assert _one(spans, "execute_tool add")["run_id"] == run["id"]
    assert run["id"] not in (await client.get("/runs", params={"tool": "add"})).text
    assert run["id"] in (await client.get("/runs")).text


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.mark.browser
def test_chromium_shows_the_agent_reported_chip(trials: Trials, chromium: Any) -> None:
    run = trials.runs[1]
    spans = trials.spans[run["id"]]
    page = chromium.new_page()
    try:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{trials.url}/runs/{run['id']}")
        execute = _one(spans, "execute_tool add")["span_id"]
        chip = page.locator(f"#span-{execute} .chip.reported")
        chip.wait_for(state="visible")
        assert chip.inner_text() == "agent-reported"
        assert chip.get_attribute("title") == TITLE
        box = chip.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
        call = _one(spans, "tools/call add")["span_id"]
        assert page.locator(f"#span-{call} .chip.reported").count() == 0
        assert page.locator(".chip.reported").count() == 1
        assert errors == []
    finally:
        page.close()
