"""Stdio upstream faults, each against a real child process: a missing command, a server that
exits at start, non-JSON on stdout, a hang (shared and per run), a crash; and one trace tree
from the agent's OTLP spans and the bridge's spans."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.server.settings import Settings

FAKE_SERVER = r"""
import json, os, sys, time
if os.environ.get("FAKE_START") == "exit":
    sys.stderr.write("fake: missing config file /etc/fake.toml\n"); sys.stderr.flush(); sys.exit(3)
if os.environ.get("FAKE_BANNER"):
    print("fake server starting up (a banner on stdout)", flush=True)
TOOLS = ["echo", "garbage", "hang", "crash"]
def send(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}})
    elif method == "tools/call":
        name = message["params"]["name"]
        meta = message["params"].get("_meta", {})
        if name == "garbage":
            sys.stdout.write("this is not json\n"); sys.stdout.flush()
        elif name == "hang":
            pass
        elif name == "crash":
            sys.stderr.write("fatal: something broke\n"); sys.stderr.flush(); os._exit(7)
        else:
            text = json.dumps({"pid": os.getpid(), "traceparent": meta.get("traceparent")})
            send({"jsonrpc": "2.0", "id": rid,
                  "result": {"content": [{"type": "text", "text": text}], "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}})
"""


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("stdio-faults")
    script = tmp / "fake_server.py"
    script.write_text(FAKE_SERVER)
    fake = [sys.executable, str(script)]
    upstreams: dict[str, Any] = {
        "fake": {"command": fake, "timeout_s": 1.0, "env": {"FAKE_BANNER": "1"}},
        "fake_per_run": {"command": fake, "timeout_s": 1.0, "per_run": True},
        "missing": {"command": ["/nonexistent/definitely-not-a-server", "--stdio"]},
        "dies": {"command": fake, "env": {"FAKE_START": "exit"}},
    }
    settings = Settings(
        db=f"sqlite:///{tmp / 'tracecard.db'}",
        sandbox_root=str(tmp / "sandboxes"),
        upstreams=upstreams,
        recording={"batch_delay_ms": 50},
    )
    with running_tracecard(settings) as running:
        yield running


def new_run(server: RunningServer) -> dict[str, Any]:
    return dict(httpx.post(f"{server.url}/api/runs", json={"config": {"name": "faults"}}).json())


def run_spans(server: RunningServer, run_id: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{server.url}/api/runs/{run_id}/spans", timeout=30).json()["spans"])


def initialize(url: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t"},
        },
    }
    return httpx.post(url, json=body, headers={"accept": "application/json, text/event-stream"})


async def echo_pid(client: Client) -> int:
    result = await client.call_tool("echo", {})
    return int(json.loads(result.content[0].text)["pid"])  # type: ignore[union-attr]


def messages(error: BaseException) -> str:
    """Every message in an exception and the groups around it."""
    if isinstance(error, BaseExceptionGroup):
        return " | ".join(messages(e) for e in error.exceptions)
    return str(error)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("upstream", "expected"),
    [
        ("missing", ["'missing'", "definitely-not-a-server", "No such file"]),
        ("dies", ["'dies'", "exited with code 3", "missing config file /etc/fake.toml"]),
    ],
)
def test_a_server_that_cannot_start_is_a_jsonrpc_error_naming_it(
    tracecard: RunningServer, upstream: str, expected: list[str]
) -> None:
    run = new_run(tracecard)
    response = initialize(run["urls"][upstream])
    assert response.status_code == 200
    error = response.json()["error"]
    for text in expected:
        assert text in error["message"], error
    spans = run_spans(tracecard, run["id"])
    failed = next(s for s in spans if s["name"] == "initialize")
    assert failed["attributes"]["error.type"] == "upstream_unavailable"
    assert expected[-1] in failed["status"]["message"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_start_failure_reaches_the_official_client(
    tracecard: RunningServer, mode: str
) -> None:
    run = new_run(tracecard)
    with pytest.raises(Exception) as caught:  # noqa: B017 - the SDK may wrap it in a group
        async with Client(run["urls"]["dies"], mode=mode) as client:
            await client.list_tools()
    assert "exited with code 3" in messages(caught.value)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_non_json_on_stdout_is_recorded_and_serving_goes_on(
    tracecard: RunningServer, mode: str
) -> None:
    run = new_run(tracecard)
    async with Client(run["urls"]["fake"], mode=mode) as client:
        with pytest.raises(MCPError, match="broke the protocol"):
            await client.call_tool("garbage", {})
        await echo_pid(client)  # the same process still serves
    spans = run_spans(tracecard, run["id"])
    bad = [s for s in spans if s["attributes"].get("tracecard.parse_error")]
    assert any("this is not json" in s["attributes"]["tracecard.request.body"] for s in bad)
    assert all(s["attributes"]["error.type"] == "upstream_protocol_error" for s in bad)
    call = next(s for s in spans if s["name"] == "tools/call garbage")
    assert call["attributes"]["error.type"] == "upstream_protocol_error"


async def test_a_hang_times_out_and_the_shared_process_is_restarted(
    tracecard: RunningServer,
) -> None:
    run = new_run(tracecard)
    async with Client(run["urls"]["fake"], mode="legacy") as client:
        before = await echo_pid(client)
        started = time.monotonic()
        with pytest.raises(MCPError, match="did not answer tools/call within 1s"):
            await client.call_tool("hang", {})
        assert time.monotonic() - started < 5
        after = await echo_pid(client)
    assert after != before and not alive(before)
    call = next(s for s in run_spans(tracecard, run["id"]) if s["name"] == "tools/call hang")
    assert call["attributes"]["error.type"] == "timeout"


async def test_a_hang_stops_the_runs_own_process(tracecard: RunningServer) -> None:
    run = new_run(tracecard)
    async with Client(run["urls"]["fake_per_run"], mode="auto") as client:
        pid = await echo_pid(client)
        with pytest.raises(MCPError, match="did not answer"):
            await client.call_tool("hang", {})
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), "the run's process should be stopped after a hang"
    other = new_run(tracecard)
    async with Client(other["urls"]["fake_per_run"], mode="auto") as client:
        assert await echo_pid(client) != pid  # every run has its own process


async def test_a_crash_is_recorded_with_stderr_and_the_process_restarts(
    tracecard: RunningServer,
) -> None:
    run = new_run(tracecard)
    async with Client(run["urls"]["fake"], mode="legacy") as client:
        before = await echo_pid(client)
        with pytest.raises(MCPError, match="exited with code 7"):
            await client.call_tool("crash", {})
        deadline = time.monotonic() + 10
        after = before
        while after == before and time.monotonic() < deadline:
            try:
                after = await echo_pid(client)
            except MCPError:
                time.sleep(0.1)
    assert after != before
    spans = run_spans(tracecard, run["id"])
    crash = next(s for s in spans if s["name"] == "upstream exited fake")
    assert crash["attributes"]["tracecard.upstream.exit_code"] == 7
    assert "fatal: something broke" in crash["attributes"]["tracecard.upstream.stderr_tail"]
    call = next(s for s in spans if s["name"] == "tools/call crash")
    assert "something broke" in call["status"]["message"]


def test_unknown_session_and_bad_json(tracecard: RunningServer) -> None:
    url = new_run(tracecard)["urls"]["fake"]
    response = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"mcp-session-id": "nope", "accept": "application/json"},
    )
    assert response.status_code == 404
    response = httpx.post(url, content=b"{nope", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32700


async def test_agent_spans_over_otlp_and_tool_spans_form_one_tree(
    tracecard: RunningServer,
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.propagate import inject
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    run = new_run(tracecard)
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{tracecard.url}/v1/traces"))
    )
    tracer = provider.get_tracer("agent")
    async with Client(run["urls"]["fake"], mode="auto") as client:
        with tracer.start_as_current_span("invoke_agent demo") as agent_span:
            with tracer.start_as_current_span("chat model") as chat:
                carrier: dict[str, str] = {}
                inject(carrier)
                result = await client.call_tool("echo", {}, meta=carrier)
    provider.shutdown()  # protobuf export, no run attribute: joined by the proxy's trace
    forwarded = json.loads(result.content[0].text)["traceparent"]  # type: ignore[union-attr]
    trace_id = format(agent_span.get_span_context().trace_id, "032x")
    # a JSON POST for the same trace, e.g. from another process of the agent
    late = {
        "traceId": trace_id,
        "spanId": "a1b2c3d4e5f60718",
        "parentSpanId": format(agent_span.get_span_context().span_id, "016x"),
        "name": "chat summary",
        "startTimeUnixNano": str(time.time_ns()),
        "endTimeUnixNano": str(time.time_ns()),
    }
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [late]}]}]}
    assert httpx.post(f"{tracecard.url}/v1/traces", json=body).status_code == 200
    spans = run_spans(tracecard, run["id"])
    by_name = {s["name"]: s for s in spans}
    tool = by_name["tools/call echo"]
    chat_id = format(chat.get_span_context().span_id, "016x")
    assert tool["parent_span_id"] == chat_id
    assert by_name["chat model"]["parent_span_id"] == by_name["invoke_agent demo"]["span_id"]
    assert by_name["chat summary"]["run_id"] == run["id"]
    # one run, one trace: the agent's trace is moved into the run's, its id kept on each span
    assert {s["trace_id"] for s in spans} == {run["trace_id"]}
    assert by_name["invoke_agent demo"]["parent_span_id"] == run["root_span_id"]
    assert tool["attributes"]["tracecard.agent.trace_id"] == trace_id
    assert by_name["chat summary"]["attributes"]["tracecard.agent.trace_id"] == trace_id
    assert forwarded.split("-")[1] == trace_id  # the server saw the trace context too
    assert forwarded.split("-")[2] == chat_id  # present already: passed on unchanged


def test_sandbox_retention_keeps_the_newest(tmp_path: Path) -> None:
    from tracecard.server.runs.sandbox import create_sandbox

    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "a.txt").write_text("a")
    settings = Settings(
        db=f"sqlite:///{tmp_path / 'x.db'}", sandbox_root=str(tmp_path / "sb"), sandbox_retention=2
    )
    paths = []
    for index in range(4):
        paths.append(create_sandbox(settings, f"run{index}", "files", str(fixture)))
        time.sleep(0.01)
    assert [p.exists() for p in paths] == [False, False, True, True]
    assert (paths[-1] / "a.txt").read_text() == "a"

