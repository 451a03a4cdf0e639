"""Suites, experiments, finish -> scores, rescoring, verdicts, scorecards and comparisons
through the JSON API, on traces written to the real store (the proxy is tested elsewhere)."""

from __future__ import annotations

import csv
import io
import time
import xml.etree.ElementTree as ET
from typing import Any

import orjson
import pytest
from litestar.testing import AsyncTestClient

from tracecard.server.app import create_app
from tracecard.server.settings import Settings
from tracecard.traces.store import Store

SUITE = """
schema_version = 1
name = "notes"

[[tasks]]
id = "echo-hello"
instruction = "Echo hello"
upstreams = ["tools"]
tools = ["echo"]

[tasks.invocation]
calls = [{ tool = "echo", arguments = { text = { exact = "hello" } } }]

[tasks.completion]
checks = [{ contains = "hello" }]

[[tasks]]
id = "no-tools"
instruction = "Say hi without tools"
upstreams = ["tools"]

[tasks.invocation]
expect_no_calls = true

[tasks.completion]
checks = [{ exact = "hi" }]
"""


def tool_span(run: dict[str, Any], tool: str, arguments: dict[str, Any], n: int) -> dict[str, Any]:
    """A span shaped exactly like the proxy's `tools/call` spans."""
    start = time.time_ns() + n * 1000
    return {
        "trace_id": run["trace_id"],
        "span_id": f"{n:04x}" + run["id"][:12],
        "parent_span_id": run["root_span_id"],
        "name": f"tools/call {tool}",
        "kind": 3,
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + 500,
        "status": {"code": 0, "message": None},
        "attributes": {
            "tracecard.run.id": run["id"],
            "tracecard.upstream": "tools",
            "tracecard.role": "agent",
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": orjson.dumps(arguments).decode(),
            "gen_ai.tool.call.result": '{"content":[{"type":"text","text":"ok"}],"isError":false}',
            "tracecard.tool.is_error": False,
        },
        "events": [],
    }


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    document = settings.model_dump()
    document["upstreams"] = {"tools": {"url": "http://127.0.0.1:9/mcp"}}
    return Settings.model_validate(document)


async def _experiment(client: AsyncTestClient, name: str, trials: int = 2) -> dict[str, Any]:
    response = await client.post(
        "/api/experiments", json={"suite": "notes", "config": {"name": name}, "trials": trials}
    )
    assert response.status_code == 201, response.text
    return response.json()


async def test_suite_experiment_finish_scorecard_and_rescore(app_settings: Settings) -> None:
    store = Store(app_settings.db)
    app = create_app(app_settings, store)
    async with AsyncTestClient(app) as client:
        created = await client.post(
            "/api/suites", content=SUITE, headers={"content-type": "application/toml"}
        )
        assert created.status_code == 201, created.text
        assert created.json()["name"] == "notes" and len(created.json()["version"]) == 64
        again = await client.post("/api/suites", content=SUITE)
        assert again.json()["version"] == created.json()["version"]  # content hash = version
        listed = (await client.get("/api/suites")).json()["suites"]
        assert [s["name"] for s in listed] == ["notes"]

        experiment = await _experiment(client, "careful")
        assert len(experiment["runs"]) == 4
        urls = experiment["runs"][0]["urls"]
        assert urls["tools"].endswith(f"/runs/{experiment['runs'][0]['id']}/mcp/tools")

        runs = {(r["task_id"], r["trial"]): r for r in experiment["runs"]}
        full = {key: (await client.get(f"/api/runs/{r['id']}")).json() for key, r in runs.items()}
        # trial 0 of echo-hello is right; trial 1 calls the wrong argument and answers wrongly
        store.insert_spans([tool_span(full[("echo-hello", 0)], "echo", {"text": "hello"}, 1)])
        store.insert_spans([tool_span(full[("echo-hello", 1)], "echo", {"text": "bye"}, 2)])
        answers = {("echo-hello", 0): "hello!", ("echo-hello", 1): "bye", ("no-tools", 0): "hi"}
        for key, answer in answers.items():
            done = await client.post(
                f"/api/runs/{runs[key]['id']}/finish", json={"final_answer": answer}
            )
            assert done.status_code == 200, done.text
        done = await client.post(
            f"/api/runs/{runs[('no-tools', 1)]['id']}/finish", json={"status": "timed_out"}
        )
        scores = {s["component"]: s for s in done.json()["scores"]}
        assert scores["completion"]["passed"] is False
        # it abstained, as expected, but a run that timed out never passes invocation (v6)
        assert (scores["invocation"]["value"], scores["invocation"]["passed"]) == (1.0, False)
        assert (
            scores["invocation"]["evidence"]["reason"] == "run did not end on its own (timed_out)"
        )

        right = (await client.get(f"/api/runs/{runs[('echo-hello', 0)]['id']}")).json()
        by_component = {s["component"]: s for s in right["scores"]}
        assert by_component["invocation"]["value"] == 1.0
        assert by_component["completion"]["passed"] is True
        assert "substring" in orjson.dumps(by_component["completion"]["evidence"]).decode()
        wrong = (await client.get(f"/api/runs/{runs[('echo-hello', 1)]['id']}")).json()
        wrong_scores = {s["component"]: s for s in wrong["scores"]}
        assert wrong_scores["invocation"]["passed"] is False
        # the evidence cites the span that did not match
        assert ("0002" + runs[("echo-hello", 1)]["id"][:12]) in orjson.dumps(
            wrong_scores["invocation"]["evidence"]
        ).decode()

        # scores are gen_ai.evaluation.result events on the root span
        spans = (await client.get(f"/api/runs/{right['id']}/spans")).json()["spans"]
        root = next(s for s in spans if s["span_id"] == right["root_span_id"])
        assert root["name"] == "invoke_agent careful"
        evaluated = {e["attributes"]["gen_ai.evaluation.name"] for e in root["events"]}
        assert {"invocation", "completion"} <= evaluated

        card_response = await client.get(f"/api/experiments/{experiment['id']}/scorecard.json")
        card = card_response.json()
        assert card_response.status_code == 200, card_response.text
        assert card["schema_version"] == 3
        rows = list(
            csv.DictReader(
                io.StringIO(
                    (await client.get(f"/api/experiments/{experiment['id']}/scorecard.csv")).text
                )
            )
        )
        assert {r["task_id"] for r in rows} == {"echo-hello", "no-tools"}
        xml = (await client.get(f"/api/experiments/{experiment['id']}/scorecard.xml")).text
        junit = ET.fromstring(xml)
        # one testcase per task x component, by either name of the format
        components = len(card["components"])
        assert len(junit.findall(".//testcase")) == 2 * components
        same = await client.get(f"/api/experiments/{experiment['id']}/scorecard.junit")
        assert same.text == xml
        markdown = (await client.get(f"/api/experiments/{experiment['id']}/scorecard.md")).text
        assert "echo-hello" in markdown

        # finishing twice is a clear error
        twice = await client.post(f"/api/runs/{right['id']}/finish", json={})
        assert twice.status_code == 409 and "already ended" in twice.json()["detail"]

        # verdicts are stored apart from the scores
        verdict = await client.post(
            f"/api/runs/{right['id']}/verdicts",
            json={"component": "completion", "agree": False, "note": "answer was wrong"},
        )
        assert verdict.status_code == 201
        card = (await client.get(f"/api/experiments/{experiment['id']}/scorecard.json")).json()
        [agreement] = card["agreement"]
        assert (agreement["n"], agreement["agree"], agreement["rate"]) == (1, 0, 0.0)

        # change the expectation and rescore: scores change, the agent is not run again
        changed = SUITE.replace('text = { exact = "hello" }', "text = { any = true }")
        await client.post("/api/suites", content=changed)
        store.update_run(
            wrong["id"],
            suite_version=(await client.get("/api/suites")).json()["suites"][0]["version"],
        )
        rescored = await client.post(f"/api/runs/{wrong['id']}/rescore")
        assert rescored.status_code == 200, rescored.text
        new = {s["component"]: s for s in rescored.json()["scores"]}
        assert new["invocation"]["passed"] is True


async def test_bad_requests_are_clear_and_store_nothing(app_settings: Settings) -> None:
    app = create_app(app_settings)
    async with AsyncTestClient(app) as client:
        bad = await client.post(
            "/api/suites", content=SUITE.replace("instruction", "instructions", 1)
        )
        assert bad.status_code == 422
        assert "tasks[0]" in bad.json()["detail"] and "request body" in bad.json()["detail"]
        assert (await client.get("/api/suites")).json()["suites"] == []

        missing = await client.post("/api/experiments", json={"suite": "nope", "trials": 1})
        assert missing.status_code == 404 and "POST it to /api/suites" in missing.json()["detail"]

        await client.post("/api/suites", content=SUITE.replace('["tools"]', '["elsewhere"]'))
        lacking = await client.post("/api/experiments", json={"suite": "notes", "trials": 2})
        assert lacking.status_code == 422 and "elsewhere" in lacking.json()["detail"]

        unknown_run = await client.post("/api/runs/nope/finish", json={})
        assert unknown_run.status_code == 404

        bad_task = await client.post("/api/runs", json={"suite": "notes", "task_id": "zzz"})
        assert bad_task.status_code == 404 and "echo-hello" in bad_task.json()["detail"]


async def test_compare_different_suites_is_an_error(app_settings: Settings) -> None:
    app = create_app(app_settings)
    async with AsyncTestClient(app) as client:
        await client.post("/api/suites", content=SUITE)
        a = await _experiment(client, "a", 1)
        await client.post("/api/suites", content=SUITE.replace('name = "notes"', 'name = "other"'))
        b = (
            await client.post(
                "/api/experiments", json={"suite": "other", "config": {"name": "b"}, "trials": 1}
            )
        ).json()
        response = await client.get(f"/api/compare?a={a['id']}&b={b['id']}")
        assert response.status_code == 422 and "different suites" in response.json()["detail"]
        same = await client.get(f"/api/compare?a={a['id']}&b={a['id']}")
        assert same.status_code == 200 and same.json()["verdict"] == "undecided"
