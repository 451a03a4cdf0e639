"""Multi round-trip requests (MCP 2026-07-28, SEP-2322) through tracecard: one logical call.

A real server (tests/servers/mrtr_server.py, the official SDK's `MCPServer`) whose `deploy` asks
the client which environment (elicitation) and then for a release note (sampling), driven by the
official `mcp` client, which answers the `input_required` results and retries: three requests on
the wire, one call for the task, the scorers and the transcript.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client.client import Client

from tests.support.processes import ROOT, free_port, spawn
from tests.support.proxy import MCP_HEADERS, rpc, run_spans, tracecard_for
from tests.support.tracecard import RunningServer

pytestmark = pytest.mark.slow

SUITE = """
schema_version = 1
name = "mrtr"

[[tasks]]
id = "deploy-api"
instruction = "Deploy api 1.4 to staging."
upstreams = ["ops"]

[tasks.invocation]
allow_extra = false
calls = [{ tool = "deploy", arguments = { service = "api", version = "1.4" } }]

[tasks.completion]
checks = [{ contains = "to staging" }]

[tasks.efficiency]
optimal_calls = 1
"""
LIMIT = 64 * 1024  # max_body_bytes of this tracecard: a bigger retry is refused


@pytest.fixture(scope="module")
def ops() -> Iterator[str]:
    port = free_port()
    script = str(ROOT / "tests" / "servers" / "mrtr_server.py")
    with spawn([sys.executable, script, str(port)], port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def tracecard(ops: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("mrtr")
    script = str(ROOT / "tests" / "servers" / "mrtr_server.py")
    upstreams = {"ops": {"url": ops}, "ops_stdio": {"command": [sys.executable, script, "stdio"]}}
    with tracecard_for(upstreams, folder, max_body_bytes=LIMIT) as running:
        yield running


def _agent(environment: str) -> dict[str, Any]:
    """The client's answers: `environment` to the elicitation, a fixed note to sampling."""

    async def elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"environment": environment})

    async def sample(
        _context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        text = types.TextContent(type="text", text="faster logins")
        return types.CreateMessageResult(role="assistant", content=text, model="scripted")

    return {"elicitation_callback": elicit, "sampling_callback": sample}


async def _call(url: str, environment: str, tool: str, arguments: dict[str, Any]) -> str:
    # the protocol pinned: under load, auto mode's server/discover probe may time out while a
    # stdio process starts, and the client would fall back to the session protocol
    async with Client(url, mode="2026-07-28", **_agent(environment)) as client:
        result = await client.call_tool(tool, arguments)
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def _finish(base: str, run_id: str, answer: str) -> dict[str, dict[str, Any]]:
    response = httpx.post(f"{base}/api/runs/{run_id}/finish", json={"final_answer": answer})
    assert response.status_code == 200, response.text
    return {s["component"]: s for s in response.json()["scores"]}


def test_a_multi_round_trip_call_is_one_call_with_its_rounds(tracecard: RunningServer) -> None:
    base = tracecard.url
    toml = {"content-type": "application/toml"}
    assert httpx.post(f"{base}/api/suites", content=SUITE, headers=toml).status_code == 201

    # the right agent: answers staging; the server asks twice, so the call takes 3 requests
    run = httpx.post(f"{base}/api/runs", json={"suite": "mrtr", "task_id": "deploy-api"}).json()
    answer = asyncio.run(_call(run["urls"]["ops"], "staging", "deploy", DEPLOY))
    assert answer == "deployed api 1.4 to staging: faster logins"
    spans = run_spans(base, run["id"])
    [call] = [s for s in spans if s["name"] == "tools/call deploy"]
    attributes = call["attributes"]
    assert attributes["tracecard.mrtr.rounds"] == 3
    assert attributes["gen_ai.tool.name"] == "deploy"
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == DEPLOY
    assert "deployed api 1.4 to staging" in attributes["gen_ai.tool.call.result"]
    rounds = sorted(
        (s for s in spans if s["parent_span_id"] == call["span_id"]),
        key=lambda s: s["attributes"]["tracecard.mrtr.round"],
    )
    assert [s["name"] for s in rounds] == [f"round {i} · tools/call deploy" for i in (1, 2, 3)]
    assert all("gen_ai.tool.name" not in s["attributes"] for s in rounds)  # never a call
    asked = [json.loads(s["attributes"]["tracecard.mrtr.input_requests"]) for s in rounds[:2]]
    assert [r["method"] for a in asked for r in a.values()] == [
        "elicitation/create",
        "sampling/createMessage",
    ]
    answered = [json.loads(s["attributes"]["tracecard.mrtr.input_responses"]) for s in rounds[1:]]
    assert [*answered[0].values()][0]["content"] == {"environment": "staging"}
    assert [*answered[1].values()][0]["content"]["text"] == "faster logins"
    assert all("tracecard.mrtr.request_state" in s["attributes"] for s in rounds[1:])
    scores = _finish(base, run["id"], answer)
    assert scores["invocation"]["passed"] is True and scores["invocation"]["value"] == 1.0
    assert scores["completion"]["passed"] is True
    assert scores["efficiency"]["evidence"]["calls"] == 1
    assert scores["efficiency"]["value"] == 1.0

    # the wrong agent answers production: the same one call, and its answer is evidence
    wrong = httpx.post(f"{base}/api/runs", json={"suite": "mrtr", "task_id": "deploy-api"}).json()
    answer = asyncio.run(_call(wrong["urls"]["ops"], "production", "deploy", DEPLOY))
    assert "to production" in answer
    scores = _finish(base, wrong["id"], answer)
    assert scores["completion"]["passed"] is False  # it deployed where it was not asked to
    [expected] = scores["invocation"]["evidence"]["expected"]
    assert expected["rounds"] == 3
    first = expected["answers"][0]
    assert first["round"] == 1
    assert [*first["responses"].values()][0]["content"] == {"environment": "production"}
    assert scores["efficiency"]["evidence"]["calls"] == 1
    page = httpx.get(f"{base}/runs/{wrong['id']}", timeout=30)
    assert page.status_code == 200
    assert "round 1: accept {&#34;environment&#34;: &#34;production&#34;}" in page.text


DEPLOY = {"service": "api", "version": "1.4"}


def test_sampling_only_and_bad_retries_are_recorded_never_dropped(
    tracecard: RunningServer,
) -> None:
    base = tracecard.url
    run = httpx.post(f"{base}/api/runs", json={}).json()
    url = run["urls"]["ops"]
    text = asyncio.run(_call(url, "staging", "summarize", {"topic": "tracecard"}))
    assert text == "summary of tracecard: faster logins"

    headers = {
        **MCP_HEADERS,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "deploy",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    # a retry whose requestState names no open round: its own call, mrtr_unmatched
    stray = {
        "name": "deploy",
        "arguments": DEPLOY,
        "inputResponses": {"k": {"action": "accept", "content": {"environment": "qa"}}},
        "requestState": "not-a-state-tracecard-saw",
        "_meta": meta,
    }
    answered = httpx.post(url, json=rpc("tools/call", stray, id=7), headers=headers, timeout=30)
    # (the server refuses it: tracecard passes its answer on as it came)
    assert answered.json()["error"]["code"] == -32602, answered.text
    # an inputResponses payload over the body limit is refused like any body
    huge = {**stray, "inputResponses": {"k": {"action": "accept", "content": {"x": "y" * LIMIT}}}}
    refused = httpx.post(url, json=rpc("tools/call", huge, id=8), headers=headers, timeout=30)
    assert refused.status_code == 413, refused.text

    # a call the server asked about and the client never retried ends with its run
    first = {"name": "deploy", "arguments": {"service": "db", "version": "2"}, "_meta": meta}
    asked = httpx.post(url, json=rpc("tools/call", first, id=9), headers=headers, timeout=30)
    assert asked.json()["result"]["resultType"] == "input_required", asked.text
    assert httpx.post(f"{base}/api/runs/{run['id']}/finish", json={}).status_code == 200

    spans = run_spans(base, run["id"])
    deploys = {
        json.loads(s["attributes"]["gen_ai.tool.call.arguments"])["service"]: s
        for s in spans
        if s["name"] == "tools/call deploy"
    }
    assert deploys.keys() == {"api", "db"}
    left, unmatched = deploys["db"], deploys["api"]
    assert left["attributes"]["error.type"] == "mrtr_incomplete"
    assert left["attributes"]["tracecard.mrtr.rounds"] == 1
    [summary] = [s for s in spans if s["name"] == "tools/call summarize"]
    assert summary["attributes"]["tracecard.mrtr.rounds"] == 2
    assert "summary of tracecard" in summary["attributes"]["gen_ai.tool.call.result"]
    assert unmatched["attributes"]["error.type"] == "mrtr_unmatched"
    assert unmatched["attributes"]["rpc.response.status_code"] == "-32602"
    assert unmatched["attributes"]["gen_ai.tool.name"] == "deploy"  # a call of its own
    assert '"qa"' in unmatched["attributes"]["tracecard.mrtr.input_responses"]


def test_the_stdio_bridge_asks_a_stateless_client_in_rounds(tracecard: RunningServer) -> None:
    """A stdio server asks mid-call (session protocol); the bridge answers the stateless client
    `input_required` and hands its answers on: one call, three rounds, as over HTTP."""
    base = tracecard.url
    run = httpx.post(f"{base}/api/runs", json={}).json()
    url = run["urls"]["ops_stdio"]
    answer = asyncio.run(_call(url, "staging", "deploy", DEPLOY))
    assert answer == "deployed api 1.4 to staging: faster logins"
    spans = run_spans(base, run["id"])
    [call] = [s for s in spans if s["name"] == "tools/call deploy"]
    assert call["attributes"]["tracecard.mrtr.rounds"] == 3
    assert "to staging" in call["attributes"]["gen_ai.tool.call.result"]
    answers = json.loads(call["attributes"]["tracecard.mrtr.answers"])
    assert [*answers[0]["responses"].values()][0]["content"] == {"environment": "staging"}
    rounds = sorted(
        (s for s in spans if s["parent_span_id"] == call["span_id"] and "round" in s["name"]),
        key=lambda s: s["attributes"]["tracecard.mrtr.round"],
    )
    assert [s["name"] for s in rounds] == [f"round {i} · tools/call deploy" for i in (1, 2, 3)]
    assert "elicitation/create" in rounds[0]["attributes"]["tracecard.mrtr.input_requests"]
    assert "sampling/createMessage" in rounds[1]["attributes"]["tracecard.mrtr.input_requests"]
    assert "faster logins" in rounds[2]["attributes"]["tracecard.mrtr.input_responses"]

    # a retry with a state the bridge never issued: refused as the SDK refuses it, recorded
    headers = {**MCP_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    stray = {"name": "status", "arguments": {"service": "api"}, "requestState": "forged"}
    body = rpc("tools/call", {**stray, "_meta": meta}, id=3)
    refused = httpx.post(url, json=body, headers={**headers, "mcp-name": "status"}, timeout=30)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32602
    spans = run_spans(base, run["id"])
    [unmatched] = [s for s in spans if s["name"] == "tools/call status"]
    assert unmatched["attributes"]["error.type"] == "mrtr_unmatched"
