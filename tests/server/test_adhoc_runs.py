"""Ad-hoc runs as a plain recorder's user sees them, driven by the official `mcp` client in
both protocol generations: a session is one run and ends on DELETE; stateless clients are
grouped by the trace context they send; an SDK's version probe to an older server is no error;
an idle run ends."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from sqlmodel import select

from tests.support.processes import ROOT, free_port, mcp_tool_server, spawn
from tests.support.proxy import tracecard_for
from tests.support.tracecard import RunningServer, await_flush, runtime_of
from tracecard.traces.models import RunRow, SpanRow

NODE = ROOT / "node_modules" / ".bin" / "node"


@pytest.fixture(scope="module")
def tool_url() -> Iterator[str]:
    with mcp_tool_server() as url:
        yield url


@pytest.fixture(scope="module")
def legacy_url() -> Iterator[str]:
    """A session-protocol-only server (TypeScript SDK 1.32): refuses `server/discover`."""
    port = free_port()
    script = str(ROOT / "tests" / "servers" / "legacy_http_server.mjs")
    with spawn([str(NODE), script, str(port)], port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def tracecard(
    tool_url: str, legacy_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    upstreams = {"tools": {"url": tool_url}, "old": {"url": legacy_url}}
    with tracecard_for(upstreams, tmp_path_factory.mktemp("tc")) as running:
        yield running


def _runs_of(running: RunningServer, **where: Any) -> dict[str, RunRow]:
    with runtime_of(running).store.session() as session:
        query = select(SpanRow)
        for name, value in where.items():
            query = query.where(getattr(SpanRow, name) == value)
        run_ids = {s.run_id for s in session.scalars(query)}
        return {r.id: r for r in session.scalars(select(RunRow).where(RunRow.id.in_(run_ids)))}


def _spans(running: RunningServer, run_id: str) -> list[SpanRow]:
    with runtime_of(running).store.session() as session:
        return list(session.scalars(select(SpanRow).where(SpanRow.run_id == run_id)))


def _ended(running: RunningServer, run_id: str, timeout: float = 20.0) -> RunRow:
    """The run once it has ended (ending is in the background), polled within `timeout`."""
    store = runtime_of(running).store
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = store.get_run(run_id)
        if run is not None and run.status == "finished":
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end within {timeout}s")


def _echo_run(running: RunningServer, text: str) -> RunRow:
    await_flush(running)
    runs = _runs_of(running, tool_name="echo")
    def holds(run: RunRow) -> bool:
        return any(
            text in (s.attributes.get("gen_ai.tool.call.arguments") or "")
            for s in _spans(running, run.id)
        )

    found = [r for r in runs.values() if holds(r)]
    assert len(found) == 1, f"{len(found)} runs hold the echo of {text!r}"
    return found[0]


async def test_a_session_is_one_run_that_ends_on_delete(tracecard: RunningServer) -> None:
    async with Client(f"{tracecard.url}/mcp/tools", mode="legacy") as client:
        await client.call_tool("echo", {"text": "session-one"})
        await client.call_tool("fail", {"message": "boom"})
    run = _ended(tracecard, _echo_run(tracecard, "session-one").id)
    assert run.end_reason == "deleted"
    assert (run.calls, run.errors, run.upstreams) == (2, 1, ["tools"])
    assert run.client and run.client.startswith("mcp")  # the SDK's clientInfo name/version
    assert run.duration_ms >= 0 and run.finished_at is not None
    await_flush(tracecard)
    spans = _spans(tracecard, run.id)
    root = [s for s in spans if s.span_id == run.root_span_id]
    children = [s for s in spans if s.span_id != run.root_span_id]
    assert len(root) == 1 and root[0].name == "invoke_agent adhoc"
    # the root spans its children exactly: no stretch to when tracecard noticed the end
    assert root[0].end_ns == max(s.end_ns or s.start_ns for s in children)
    assert root[0].start_ns == min(s.start_ns for s in children)


async def test_stateless_clients_with_their_own_trace_are_their_own_runs(
    tracecard: RunningServer,
) -> None:
    traces = [secrets.token_hex(16) for _ in range(2)]

    async def agent(trace_id: str) -> None:
        context = SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(secrets.token_hex(8), 16),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        with trace.use_span(NonRecordingSpan(context)):  # the SDK sends it in params._meta
            async with Client(f"{tracecard.url}/mcp/tools", mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                for n in range(3):
                    await client.call_tool("echo", {"text": f"trace-{trace_id}-{n}"})
                    await asyncio.sleep(0)

    await asyncio.gather(*(agent(t) for t in traces))  # one address, one client name
    for trace_id in traces:
        run = _echo_run(tracecard, f"trace-{trace_id}-0")
        assert run.adhoc_key == f"trace:{trace_id}" and run.trace_id == trace_id
        texts = {
            s.attributes.get("gen_ai.tool.call.arguments")
            for s in _spans(tracecard, run.id)
            if s.tool_name == "echo"
        }
        assert len(texts) == 3 and all(trace_id in t for t in texts if t)
        assert run.status == "running"  # stateless: it ends when idle


async def test_a_version_probe_to_an_older_server_is_not_an_error(
    tracecard: RunningServer,
) -> None:
    async with Client(f"{tracecard.url}/mcp/old", mode="auto") as client:
        assert client.protocol_version == "2025-11-25"  # the SDK fell back to initialize
        result = await client.call_tool("echo", {"text": "old-server"})
        assert result.content[0].text == "old-server"  # type: ignore[union-attr]
    run = _ended(tracecard, _echo_run(tracecard, "old-server").id)
    spans = {s.name: s for s in _spans(tracecard, run.id)}
    probe = spans["server/discover"]  # in the session's run, not a run of its own
    assert probe.attributes["tracecard.probe"] == "version"
    assert probe.error_type is None and probe.status_code != 2
    assert "initialize" in spans and run.errors == 0 and run.calls == 1
    assert run.upstreams == ["old"]


def test_an_idle_stateless_run_ends_and_the_next_call_opens_another(
    tool_url: str, tmp_path: Path
) -> None:
    upstreams = {"tools": {"url": tool_url}}
    with tracecard_for(upstreams, tmp_path, adhoc_idle_s=0.2) as running:

        async def call(text: str) -> None:
            async with Client(f"{running.url}/mcp/tools", mode="auto") as client:
                await client.call_tool("echo", {"text": text})

        asyncio.run(call("before-idle"))
        first = _ended(running, _echo_run(running, "before-idle").id, timeout=10)
        assert first.end_reason == "idle" and first.calls == 1
        asyncio.run(call("after-idle"))
        second = _echo_run(running, "after-idle")
        assert second.id != first.id and second.adhoc_key == first.adhoc_key




def test_a_run_created_with_a_config_name_is_titled_by_it(tracecard: RunningServer) -> None:
    import httpx

    from tests.support.proxy import new_run

    run = new_run(tracecard.url, config={"name": "nightly-agent"})
    page = httpx.get(f"{tracecard.url}/runs/{run['id']}", timeout=10).text
    assert "<h1>nightly-agent " in page and "ad-hoc run" not in page
    listed = httpx.get(f"{tracecard.url}/runs", timeout=10).text
    assert f'<a href="/runs/{run["id"]}">nightly-agent</a>' in listed
