"""One run, one trace: a real pydantic-ai agent with its OpenTelemetry instrumentation exporting
to tracecard's OTLP endpoint starts a trace of its own (it is never handed the run's context);
its spans and the proxy's tool spans under them end in the run's trace, as one tree under the
run's root, with the agent's trace id kept on each moved span."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.instrumented import instrumented_run
from tests.support.processes import mcp_tool_server
from tests.support.proxy import new_run, run_spans, tracecard_for
from tests.support.tracecard import RunningServer


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with mcp_tool_server() as url:
        with tracecard_for({"tools": {"url": url}}, tmp_path_factory.mktemp("one-trace")) as s:
            yield s


@pytest.mark.parametrize("names_run", [True, False], ids=["resource-names-run", "trace-only"])
async def test_an_instrumented_agent_run_is_one_trace_and_one_tree(
    tracecard: RunningServer, names_run: bool
) -> None:
    await _check_one_tree(tracecard, names_run)


@pytest.mark.postgres
async def test_one_trace_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    with mcp_tool_server() as url, tracecard_for({"tools": {"url": url}}, tmp_path, db=pg_url) as s:
        await _check_one_tree(s, names_run=False)


async def _check_one_tree(tracecard: RunningServer, names_run: bool) -> None:
    run = new_run(tracecard.url, config={"name": "pydantic-ai"})
    await instrumented_run(tracecard.url, run, names_run)
    finished = httpx.post(f"{tracecard.url}/api/runs/{run['id']}/finish", json={}, timeout=60)
    assert finished.status_code == 200, finished.text
    spans = run_spans(tracecard.url, run["id"])
    assert {s["trace_id"] for s in spans} == {run["trace_id"]}
    by_id = {s["span_id"]: s for s in spans}
    roots = [s for s in spans if s["parent_span_id"] not in by_id]
    assert [(s["span_id"], s["name"]) for s in roots] == [
        (run["root_span_id"], "invoke_agent pydantic-ai")
    ]
    assert sum(s["name"].startswith("chat ") for s in spans) == 2  # both model turns joined
    (agent_root,) = [s for s in spans if s["name"] == "invoke_agent agent"]
    assert agent_root["parent_span_id"] == run["root_span_id"]
    agent_trace = agent_root["attributes"]["tracecard.agent.trace_id"]
    assert agent_trace != run["trace_id"]
    (execute,) = [s for s in spans if s["name"] == "execute_tool add"]
    (call,) = [s for s in spans if s["name"] == "tools/call add"]
    assert call["parent_span_id"] == execute["span_id"]  # the proxy's span under the agent's
    assert call["attributes"]["tracecard.agent.trace_id"] == agent_trace
    assert call["attributes"]["tracecard.role"] == "agent"
    assert execute["attributes"]["tracecard.evidence"] == "agent_reported"  # its own claim
    otlp = httpx.get(f"{tracecard.url}/api/runs/{run['id']}/trace.otlp.json", timeout=30).json()
    exported = {
        s["traceId"] for rs in otlp["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
    }
    assert exported == {run["trace_id"]}
