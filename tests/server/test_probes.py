"""The probe runner: each probe observed once and recorded as a verifier span."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tracecard.scorers import RunFacts, parse_suite, score_outcome
from tracecard.server.evaluation.probes import ProbeContext, run_probes
from tracecard.traces import semconv as sc

SUITE = """
schema_version = 1
name = "p"
[[tasks]]
id = "t"
instruction = "x"
[tasks.outcome]
probes = [
  { id = "report", path = "report.json" },
  { id = "notes", path = "notes.txt" },
  { id = "gone", path = "gone.txt" },
  { id = "rows", upstream = "db", tool = "count_rows", arguments = { table = "t" } },
  { id = "api", method = "post", url = "http://api.test/items", json_body = { q = 1 } },
]
predicates = [
  { probe = "report", path = "$.status", op = "eq", value = "done" },
  { probe = "notes", op = "contains", value = "milk" },
  { probe = "gone", op = "absent" },
  { probe = "rows", path = "$.structuredContent.n", op = "eq", value = 3 },
  { probe = "api", path = "$.body.items", op = "contains", value = "a" },
]
"""


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def make_ctx(exporter: InMemorySpanExporter, sandbox: Path | None, **kw: Any) -> ProbeContext:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    calls: list[tuple[str, str, dict[str, Any]]] = kw.pop("calls", [])

    async def call_tool(upstream: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append((upstream, tool, arguments))
        return {"content": [], "structuredContent": {"n": 3}, "isError": False}

    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"q": 1}
        return httpx.Response(200, json={"items": ["a", "b"]})

    defaults: dict[str, Any] = {
        "call_tool": call_tool,
        "http": httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        "sandbox": sandbox,
        "tracer": provider.get_tracer("test"),
        "run_id": "run-1",
        "parent": None,
        "timeout_s": 2.0,
    }
    return ProbeContext(**(defaults | kw))


def stored(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    """Finished SDK spans in the JSON API shape the scorers read."""
    out = []
    for s in exporter.get_finished_spans():
        ctx = s.get_span_context()
        assert ctx is not None
        out.append(
            {
                "trace_id": format(ctx.trace_id, "032x"),
                "span_id": format(ctx.span_id, "016x"),
                "parent_span_id": None,
                "name": s.name,
                "kind": 3,
                "start_time_unix_nano": s.start_time,
                "end_time_unix_nano": s.end_time,
                "status": {"code": s.status.status_code.value, "message": s.status.description},
                "attributes": dict(s.attributes or {}),
                "events": [],
            }
        )
    return out


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    (tmp_path / "report.json").write_text('{"status": "done"}')
    (tmp_path / "notes.txt").write_text("eggs, milk")
    return tmp_path


async def test_every_probe_is_recorded_and_the_outcome_reads_them(
    exporter: InMemorySpanExporter, sandbox: Path
) -> None:
    task = parse_suite(SUITE, "toml").tasks[0]
    calls: list[tuple[str, str, dict[str, Any]]] = []
    outcomes = await run_probes(task, make_ctx(exporter, sandbox, calls=calls))
    assert [o.error for o in outcomes] == [None] * 5
    assert [o.value for o in outcomes[:3]] == [{"status": "done"}, "eggs, milk", None]
    assert calls == [("db", "count_rows", {"table": "t"})]

    spans = {s["attributes"][sc.PROBE_ID]: s for s in stored(exporter)}
    assert spans["report"]["name"] == "probe file report.json"
    assert spans["rows"]["name"] == "tools/call count_rows"
    assert spans["api"]["name"] == "probe http POST"
    rows = spans["rows"]["attributes"]
    assert rows[sc.ROLE] == sc.ROLE_VERIFIER and rows[sc.RUN_ID] == "run-1"
    assert rows[sc.GEN_AI_TOOL_NAME] == "count_rows" and rows[sc.UPSTREAM] == "db"
    assert json.loads(rows[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"table": "t"}
    assert json.loads(rows[sc.PROBE_VALUE])["structuredContent"] == {"n": 3}
    assert json.loads(spans["gone"]["attributes"][sc.PROBE_VALUE]) is None
    assert outcomes[3].span_id == spans["rows"]["span_id"]

    score = score_outcome(task, stored(exporter), RunFacts("finished"))
    assert (score.value, score.passed) == (1.0, True)


async def test_a_path_escaping_the_sandbox_is_a_probe_error(
    exporter: InMemorySpanExporter, sandbox: Path
) -> None:
    (sandbox.parent / "secret.txt").write_text("s")
    text = SUITE.replace('path = "notes.txt"', 'path = "../secret.txt"')
    task = parse_suite(text, "toml").tasks[0]
    outcomes = await run_probes(task, make_ctx(exporter, sandbox))
    assert outcomes[1].error is not None and "escapes the sandbox" in outcomes[1].error
    assert outcomes[1].value is None
    span = next(s for s in exporter.get_finished_spans() if s.attributes[sc.PROBE_ID] == "notes")  # type: ignore[index]
    assert span.status.status_code == StatusCode.ERROR
    assert sc.PROBE_VALUE not in (span.attributes or {})
    score = score_outcome(task, stored(exporter), RunFacts("finished"))
    assert score.passed is None and "escapes the sandbox" in score.evidence["reason"]


async def test_failing_tool_and_timeouts_are_recorded_not_raised(
    exporter: InMemorySpanExporter, sandbox: Path
) -> None:
    async def broken(upstream: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("upstream down")

    def slow_handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("no route", request=request)

    ctx = make_ctx(
        exporter,
        sandbox,
        call_tool=broken,
        http=httpx.AsyncClient(transport=httpx.MockTransport(slow_handler)),
    )
    outcomes = {o.probe_id: o for o in await run_probes(parse_suite(SUITE, "toml").tasks[0], ctx)}
    assert outcomes["rows"].error == "ConnectionError: upstream down"
    assert outcomes["api"].error is not None and "ConnectTimeout" in outcomes["api"].error
    assert outcomes["report"].error is None


async def test_timeout(exporter: InMemorySpanExporter, sandbox: Path) -> None:
    async def hang(upstream: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    ctx = make_ctx(exporter, sandbox, call_tool=hang, timeout_s=0.05)
    outcomes = {o.probe_id: o for o in await run_probes(parse_suite(SUITE, "toml").tasks[0], ctx)}
    assert outcomes["rows"].error == "probe timed out after 0.05s"
    span = next(s for s in exporter.get_finished_spans() if s.attributes[sc.PROBE_ID] == "rows")  # type: ignore[index]
    assert span.attributes[sc.ERROR_TYPE] == sc.ERR_TIMEOUT  # type: ignore[index]


async def test_file_probe_without_a_sandbox(exporter: InMemorySpanExporter) -> None:
    outcomes = await run_probes(parse_suite(SUITE, "toml").tasks[0], make_ctx(exporter, None))
    assert outcomes[0].error == "the run has no sandbox to read files from"


async def test_task_without_outcome_runs_nothing(exporter: InMemorySpanExporter) -> None:
    task = parse_suite(
        'schema_version = 1\nname = "n"\n[[tasks]]\nid = "a"\ninstruction = "x"\n', "toml"
    ).tasks[0]
    assert await run_probes(task, make_ctx(exporter, None)) == []
    assert exporter.get_finished_spans() == ()


async def test_an_unknown_tool_or_a_5xx_is_a_probe_error_never_a_score(
    exporter: InMemorySpanExporter, sandbox: Path
) -> None:
    async def unknown(upstream: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        # what MCP servers answer for a tool they do not have
        return {"content": [{"type": "text", "text": f"Unknown tool: {tool}"}], "isError": True}

    def unavailable(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="maintenance")

    ctx = make_ctx(
        exporter,
        sandbox,
        call_tool=unknown,
        http=httpx.AsyncClient(transport=httpx.MockTransport(unavailable)),
    )
    task = parse_suite(SUITE, "toml").tasks[0]
    outcomes = {o.probe_id: o for o in await run_probes(task, ctx)}
    assert outcomes["rows"].error == "tool 'count_rows' on 'db' failed: Unknown tool: count_rows"
    assert outcomes["api"].error == "HTTP 503 from POST http://api.test/items"
    rows = next(s for s in stored(exporter) if s["attributes"][sc.PROBE_ID] == "rows")
    assert rows["attributes"][sc.ERROR_TYPE] == sc.ERR_TOOL
    score = score_outcome(task, stored(exporter), RunFacts("finished"))
    assert (score.value, score.passed) == (None, None)
    assert "Unknown tool: count_rows" in score.evidence["reason"]
    assert "HTTP 503" in score.evidence["reason"]
