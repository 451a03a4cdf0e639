"""#14.13: the OTLP endpoint an agent is handed works as given to the SDK's exporter, and
`tracecard run` warns when OTEL_EXPORTER_OTLP_ENDPOINT sends the agent's spans elsewhere."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from tests.support.tracecard import await_flush, running_tracecard
from tracecard.client import RunHandle
from tracecard.server.cli.run_output import warn_about_otel_endpoint
from tracecard.server.orchestration.agents import agent_environment
from tracecard.server.settings import Settings
from tracecard.traces.store import Store


def test_the_handed_out_endpoint_takes_spans_from_the_sdk_exporter(settings: Settings) -> None:
    with running_tracecard(settings) as running:
        run_id = httpx.post(f"{running.url}/api/runs", json={}).json()["id"]
        env = agent_environment(
            RunHandle(id=run_id, task_id="t", trial=0, instruction="", urls={}),
            server_url=running.url,
            experiment_id="e",
            config_name="c",
            answer_file=Path("/tmp/a"),
            base={},
        )
        assert env["TRACECARD_OTLP_ENDPOINT"] == f"{running.url}/v1/traces"
        sent: list[SpanExportResult] = []

        class Recording(OTLPSpanExporter):
            def export(self, spans):  # type: ignore[no-untyped-def]
                sent.append(super().export(spans))
                return sent[-1]

        provider = TracerProvider()
        exporter = Recording(
            endpoint=env["TRACECARD_OTLP_ENDPOINT"], headers={"Tracecard-Run": run_id}
        )
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("agent").start_as_current_span("chat my-model"):
            pass
        provider.shutdown()
        assert sent == [SpanExportResult.SUCCESS]
        await_flush(running)
        store = Store(settings.db)
        names = [s["name"] for s in store.spans_for_run(run_id)]
        store.dispose()
        assert "chat my-model" in names


def test_run_warns_when_otel_points_elsewhere(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    warn_about_otel_endpoint("http://127.0.0.1:7800")
    err = capsys.readouterr().err
    assert err.startswith("tracecard: warning: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006")
    assert "not to tracecard" in err and "http://127.0.0.1:7800/v1/traces" in err
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:7800")
    warn_about_otel_endpoint("http://127.0.0.1:7800")
    assert capsys.readouterr().err == ""  # pointing at tracecard: nothing to say


def test_an_agent_that_continues_traceparent_starts_under_the_runs_root(
    settings: Settings,
) -> None:
    """The experiment's runs carry their root span's W3C context, `tracecard run` hands it over
    as TRACEPARENT, and an agent that continues it needs no server-side regrouping."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from tracecard.client import TracecardClient

    suite = 'schema_version = 1\nname = "tp"\n[[tasks]]\nid = "t"\ninstruction = "hi"\n'
    with running_tracecard(settings) as running, TracecardClient(running.url) as client:
        client.add_suite_text(suite)
        run = client.create_experiment("tp", {"name": "c"}, trials=2).runs[1]
        env = agent_environment(
            run,
            server_url=running.url,
            experiment_id="e",
            config_name="c",
            answer_file=Path("/tmp/a"),
            base={"TRACESTATE": "vendor=of-another-trace"},
        )
        assert "TRACESTATE" not in env
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=env["TRACECARD_OTLP_ENDPOINT"])
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        context = TraceContextTextMapPropagator().extract({"traceparent": env["TRACEPARENT"]})
        with provider.get_tracer("agent").start_as_current_span("invoke_agent", context=context):
            pass
        provider.shutdown()
        await_flush(running)
        store = Store(settings.db)
        row = store.get_run(run.id)
        spans = {s["name"]: s for s in store.spans_for_run(run.id)}
        store.dispose()
    assert row is not None
    assert env["TRACEPARENT"] == f"00-{row.trace_id}-{row.root_span_id}-01"
    agent = spans["invoke_agent"]
    assert agent["trace_id"] == row.trace_id and agent["parent_span_id"] == row.root_span_id
    assert "tracecard.agent.trace_id" not in agent["attributes"]  # nothing had to be moved
