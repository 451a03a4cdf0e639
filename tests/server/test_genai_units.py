"""The model span builder and stream readers on their own (the SDK's in-memory exporter)."""

from __future__ import annotations

from typing import Any

import orjson
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracecard.server.recording.genai import ModelExchange, record_model_call
from tracecard.server.recording.genai_output import API_CHAT, API_MESSAGES, API_RESPONSES
from tracecard.server.recording.genai_stream import StreamReader
from tracecard.server.recording.recorder import Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.settings import RecordingSettings


def recorded(settings: RecordingSettings, **fields: Any) -> dict[str, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = Recorder(provider.get_tracer("test"), settings)
    run = RunInfo(id="r1", trace_id="ab" * 16, root_span_id="cd" * 8)
    exchange = ModelExchange(
        run=run, upstream="openai", provider="openai", method="POST", start_ns=1, **fields
    )
    record_model_call(recorder, exchange, 2)
    (span,) = exporter.get_finished_spans()
    return dict(span.attributes or {})


REQUEST = orjson.dumps(
    {
        "model": "m",
        "messages": [{"role": "user", "content": "my password is hunter2"}],
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}],
    }
)
ANSWER = orjson.dumps(
    {
        "id": "x",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "login", "arguments": '{"password": "hunter2"}'},
                        }
                    ],
                },
            }
        ],
    }
)


def test_content_is_on_by_default_and_secrets_in_it_are_redacted() -> None:
    attrs = recorded(
        RecordingSettings(),
        api=API_CHAT,
        path="chat/completions",
        request_body=REQUEST,
        status_code=200,
        response_body=ANSWER,
        response_size=len(ANSWER),
    )
    assert "gen_ai.input.messages" in attrs and "gen_ai.tool.definitions" in attrs
    calls = orjson.loads(attrs["tracecard.llm.tool_calls"])
    assert calls[0]["arguments"] != {"password": "hunter2"}  # a secret-looking key: redacted
    assert "hunter2" not in attrs["gen_ai.output.messages"]


def test_model_content_off_keeps_only_what_scoring_needs() -> None:
    attrs = recorded(
        RecordingSettings(model_content=False),
        api=API_CHAT,
        path="chat/completions",
        request_body=REQUEST,
        status_code=200,
        response_body=ANSWER,
        response_size=len(ANSWER),
    )
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions"):
        assert key not in attrs
    assert orjson.loads(attrs["tracecard.llm.tool_calls"])[0]["name"] == "login"
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["tool_calls"]


def feed(api: str, events: list[dict[str, Any]]) -> StreamReader:
    reader = StreamReader(api)
    for event in events:
        reader.event(str(event.get("type", "message")), orjson.dumps(event).decode())
    return reader


def test_responses_stream_cut_inside_a_function_call() -> None:
    reader = feed(
        API_RESPONSES,
        [
            {"type": "response.created", "response": {"id": "resp_1", "model": "m"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "function_call", "call_id": "c1", "name": "add", "arguments": ""},
            },
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "delta": '{"a": 1',
            },
        ],
    )
    output = reader.finish()
    assert output.complete is False and output.response_id == "resp_1"
    assert output.tool_calls() == [
        {"id": "c1", "name": "add", "arguments": '{"a": 1', "complete": False}
    ]


def test_anthropic_refusal_and_usage_from_the_stream() -> None:
    reader = feed(
        API_MESSAGES,
        [
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "model": "c",
                    "usage": {"input_tokens": 9, "output_tokens": 1, "cache_read_input_tokens": 3},
                },
            },
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "No."},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "refusal"},
                "usage": {"output_tokens": 4},
            },
            {"type": "message_stop"},
        ],
    )
    output = reader.finish()
    assert output.complete and output.finish_reasons == ["refusal"]
    assert (output.input_tokens, output.output_tokens) == (12, 4)  # cached input counted
    assert output.messages()[0]["parts"] == [{"type": "text", "content": "No."}]
    assert output.first_output_ns is not None
