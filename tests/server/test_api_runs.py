"""The run API: create, proxy, spans, OTLP export and finish over a real server (the proxy needs
one); unknown runs and errored runs in process."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest
from google.protobuf.json_format import Parse
from mcp.client.client import Client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.in_process import in_process_tracecard
from tests.support.processes import mcp_tool_server
from tests.support.proxy import new_run, run_spans, tracecard_for
from tests.support.tracecard import RunningServer
from tracecard.server.settings import Settings


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with mcp_tool_server("--stateless", "--json") as url:
        upstreams = {"tools": {"url": url}, "api": {"url": "http://127.0.0.1:9/x", "kind": "http"}}
        with tracecard_for(upstreams, tmp_path_factory.mktemp("api")) as running:
            yield running


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    folder = tmp_path_factory.mktemp("api-in-process")
    settings = Settings(db=f"sqlite:///{folder / 'tracecard.db'}", sandbox_root=str(folder / "s"))
    with in_process_tracecard(settings) as tracecard:
        yield tracecard.client


async def test_run_lifecycle(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url, task_id="t1", config={"name": "cfg", "model": "m"})
    assert run["status"] == "pending" and run["config"] == {"name": "cfg", "model": "m"}
    assert run["urls"] == {
        "tools": f"{tracecard.url}/runs/{run['id']}/mcp/tools",
        "api": f"{tracecard.url}/runs/{run['id']}/http/api/",
    }
    async with Client(run["urls"]["tools"]) as client:
        await client.call_tool("add", {"a": 2, "b": 2})
    finished = httpx.post(
        f"{tracecard.url}/api/runs/{run['id']}/finish", json={"final_answer": "4"}, timeout=30
    )
    assert finished.status_code == 200, finished.text
    assert finished.json()["status"] == "finished" and finished.json()["final_answer"] == "4"
    read = httpx.get(f"{tracecard.url}/api/runs/{run['id']}").json()
    assert read["status"] == "finished"

    spans = run_spans(tracecard.url, run["id"])
    names = [s["name"] for s in spans]
    assert "invoke_agent cfg" in names and "tools/call add" in names
    starts = [s["start_time_unix_nano"] for s in spans]
    assert starts == sorted(starts)

    export = httpx.get(f"{tracecard.url}/api/runs/{run['id']}/trace.otlp.json")
    assert export.status_code == 200
    request = Parse(export.text, ExportTraceServiceRequest())
    exported = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(s.name for s in exported) == sorted(names)
    root = next(s for s in exported if s.name == "invoke_agent cfg")
    # OTLP/JSON writes ids as hex; protobuf's JSON parser reads bytes fields as base64
    assert base64.b64encode(root.trace_id).decode() == run["trace_id"]
    assert base64.b64encode(root.span_id).decode() == run["root_span_id"]

    again = httpx.post(f"{tracecard.url}/api/runs/{run['id']}/finish", json={})
    assert again.status_code == 409 and "already ended" in again.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/runs/nope"),
        ("GET", "/api/runs/nope/spans"),
        ("GET", "/api/runs/nope/trace.otlp.json"),
        ("POST", "/api/runs/nope/finish"),
    ],
)
def test_unknown_run_is_404(api: httpx.Client, method: str, path: str) -> None:
    answer = api.request(method, path, json={} if method == "POST" else None)
    assert answer.status_code == 404 and "'nope'" in answer.json()["detail"]


def test_a_run_that_errored_keeps_its_reason(api: httpx.Client) -> None:
    run = api.post("/api/runs", json={"config": {"name": "cfg"}}).json()
    reason = "agent exited with code 3: Traceback ... KeyError: 'ticket'"
    ended = api.post(f"/api/runs/{run['id']}/finish", json={"status": "errored", "error": reason})
    assert ended.status_code == 200 and ended.json()["error"] == reason
    read = api.get(f"/api/runs/{run['id']}").json()
    assert (read["status"], read["error"]) == ("errored", reason)
    bad = api.post(f"/api/runs/{run['id']}/finish", json={"status": "done"})
    assert bad.status_code in (400, 409)
