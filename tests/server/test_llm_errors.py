"""Model-wire failures recorded one way: the upstream's failure is the span's `error.type`
whatever the agent did after it, the agent hanging up is its own attribute, and a failed
request's usage is unknown (absent), counted apart from the model's turns.

The upstream is the scripted model (tests/servers/model_upstream.py), whose mid-stream error is
llama-server's: half an answer, then `{"error": {"code": 500, "type": "server_error"}}`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.servers.model_upstream import STREAM_ERROR, ModelUpstream, model_upstream
from tests.support.llm import model_spans, openai_client
from tests.support.proxy import new_run, tracecard_for
from tests.support.tracecard import RunningServer

USER = [{"role": "user", "content": "What is 2 + 40?"}]


@pytest.fixture(scope="module")
def model() -> Iterator[ModelUpstream]:
    with model_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def tracecard(
    model: ModelUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    upstreams: dict[str, dict[str, Any]] = {"openai": {"url": f"{model.url}/v1", "kind": "openai"}}
    with tracecard_for(upstreams, tmp_path_factory.mktemp("llm-errors")) as running:
        yield running


def recorded_span(base: str, run_id: str) -> dict[str, Any]:
    """The run's one model span, once recorded: a hang-up is noticed by the server after the
    client has left, so the span may come a moment after the client's call returned."""
    deadline = time.monotonic() + 15
    while True:
        spans = model_spans(base, run_id)
        if spans or time.monotonic() > deadline:
            assert len(spans) == 1, [s["name"] for s in spans]
            return spans[0]
        time.sleep(0.05)


def test_a_mid_stream_500_read_to_its_end_is_the_upstreams_error(
    tracecard: RunningServer,
) -> None:
    """Order 1: the upstream ends the stream, the agent reads it all (no hang-up)."""
    run = new_run(tracecard.url)
    body = {"model": "script-stream-500", "messages": USER, "stream": True}
    answer = httpx.post(f"{run['urls']['openai']}/chat/completions", json=body, timeout=10)
    assert answer.status_code == 200 and STREAM_ERROR["message"] in answer.text
    attrs = recorded_span(tracecard.url, run["id"])["attributes"]
    assert attrs["error.type"] == "500"  # as for an HTTP 500 answer
    assert attrs["tracecard.llm.error.message"] == STREAM_ERROR["message"]
    assert "tracecard.llm.client_disconnected" not in attrs
    assert "gen_ai.usage.input_tokens" not in attrs  # unknown, not 0 (#26.3)


def test_a_mid_stream_500_the_agent_hangs_up_on_is_still_the_upstreams_error(
    tracecard: RunningServer,
) -> None:
    """Order 2: the upstream keeps the stream open after its error event; the agent's SDK
    raises on the event and hangs up first. Before: `client_disconnected`."""
    run = new_run(tracecard.url)
    with pytest.raises(openai.APIError, match="peg-native"):
        with openai_client(run).chat.completions.create(
            model="script-stream-500-hold",
            messages=USER,  # type: ignore[arg-type]
            stream=True,
        ) as stream:
            list(stream)
    span = recorded_span(tracecard.url, run["id"])
    attrs = span["attributes"]
    assert attrs["error.type"] == "500"  # as for an HTTP 500 answer
    assert attrs["tracecard.llm.client_disconnected"] is True
    assert attrs["tracecard.llm.error.message"] == STREAM_ERROR["message"]
    assert span["status"]["code"] == 2 and "peg-native" in span["status"]["message"]


def test_a_hang_up_with_no_upstream_failure_is_client_disconnected(
    tracecard: RunningServer,
) -> None:
    run = new_run(tracecard.url)
    with openai_client(run).chat.completions.create(
        model="script-stream-hold",
        messages=USER,  # type: ignore[arg-type]
        stream=True,
    ) as stream:
        next(iter(stream))  # one chunk, then the agent leaves
    attrs = recorded_span(tracecard.url, run["id"])["attributes"]
    assert attrs["error.type"] == "client_disconnected"
    assert attrs["tracecard.llm.client_disconnected"] is True
    assert "tracecard.llm.error.message" not in attrs


def test_llama_servers_anthropic_stream_error_is_its_500() -> None:
    """llama-server's Messages stream ends a failed generation with `event: error` and the bare
    error object (no `{"type": "error", "error": ...}` wrapper): recorded as its 500, not as a
    stream that broke off (the real-model bench found `upstream_protocol_error`)."""
    from tracecard.server.recording.genai_output import API_MESSAGES
    from tracecard.server.recording.genai_stream import StreamReader

    reader = StreamReader(API_MESSAGES)
    start = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 1217}}}
    reader.event("message_start", json.dumps(start))
    reader.event("error", json.dumps(STREAM_ERROR))
    output = reader.finish()
    assert output.error_type == "500" and output.error_message == STREAM_ERROR["message"]
    wrapped = StreamReader(API_MESSAGES)  # Anthropic's own shape still reads the same way
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    wrapped.event("error", json.dumps({"type": "error", "error": overloaded}))
    assert wrapped.finish().error_type == "overloaded_error"
