"""A real pydantic-ai agent, scripted with a `FunctionModel`, whose OpenTelemetry
instrumentation exports to tracecard's OTLP endpoint: it asks for `add(2, 40)` through the run's
MCP URL, then answers "42". `names_run` puts `tracecard.run.id` in its resource, as
`tracecard run` does through OTEL_RESOURCE_ATTRIBUTES; without it only the trace joins the run."""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings


def add_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if not any(isinstance(m, ModelResponse) for m in messages):
        return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 40})])
    return ModelResponse(parts=[TextPart("42")])


async def instrumented_run(base_url: str, run: dict[str, Any], names_run: bool) -> None:
    """One run of the agent against tracecard at `base_url`, its spans flushed on return."""
    resource = {"service.name": "agent", **({"tracecard.run.id": run["id"]} if names_run else {})}
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{base_url}/v1/traces")))
    agent = Agent(FunctionModel(add_then_answer), toolsets=[MCPToolset(run["urls"]["tools"])])
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    async with agent:
        assert (await agent.run("add 2 and 40")).output == "42"
    provider.shutdown()
