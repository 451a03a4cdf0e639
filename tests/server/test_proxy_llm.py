"""The model proxy (`/llm/{upstream}/...`) with the official `openai` and `anthropic` SDKs as
clients and a scripted upstream built from those SDKs' types: bytes unchanged, one GenAI span."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import httpx2  # what the SDKs are built on: a cut stream surfaces as its error
import openai
import orjson
import pytest

from tests.servers.model_upstream import TOOLS, ModelUpstream, model_upstream
from tests.support.llm import claude_client, model_spans, only_span, openai_client
from tests.support.processes import free_port
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
    upstreams: dict[str, dict[str, Any]] = {
        "openai": {"url": f"{model.url}/v1", "kind": "openai"},
        "claude": {"url": model.url, "kind": "anthropic"},
        "down": {"url": f"http://127.0.0.1:{free_port()}/v1", "kind": "openai"},
    }
    with tracecard_for(upstreams, tmp_path_factory.mktemp("llm")) as running:
        yield running


CASES = [
    ("openai", "/chat/completions", {"model": "script-tools", "messages": USER}),
    ("openai", "/chat/completions", {"model": "script-text", "messages": USER, "stream": True}),
    (
        "openai",
        "/chat/completions",
        {
            "model": "script-tools",
            "messages": USER,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    ("openai", "/responses", {"model": "script-tools", "input": "hi"}),
    ("openai", "/responses", {"model": "script-text", "input": "hi", "stream": True}),
    ("claude", "/v1/messages", {"model": "script-tools", "max_tokens": 9, "messages": USER}),
    (
        "claude",
        "/v1/messages",
        {"model": "script-tools", "max_tokens": 9, "messages": USER, "stream": True},
    ),
    ("openai", "/chat/completions", {"model": "script-429", "messages": USER}),
    ("openai", "/chat/completions", {"model": "script-notjson", "messages": USER}),
]


@pytest.mark.parametrize(("upstream", "path", "body"), CASES)
def test_every_byte_is_what_a_direct_connection_gets(
    model: ModelUpstream, tracecard: RunningServer, upstream: str, path: str, body: dict[str, Any]
) -> None:
    direct_base = f"{model.url}/v1" if upstream == "openai" else model.url
    raw = orjson.dumps(body)
    answers = []
    for base in (direct_base, f"{tracecard.url}/llm/{upstream}"):
        with httpx.stream("POST", f"{base}{path}", content=raw, timeout=10) as response:
            chunks = list(response.iter_raw())
            answers.append(
                (response.status_code, response.headers["content-type"], b"".join(chunks))
            )
    assert answers[0] == answers[1]
    assert answers[0][2]  # the comparison compared something


def test_chat_completion_with_parallel_tool_calls(
    model: ModelUpstream, tracecard: RunningServer
) -> None:
    run = new_run(tracecard.url)
    answer = openai_client(run).chat.completions.create(
        model="script-tools", messages=USER, tools=TOOLS
    )  # type: ignore[arg-type]
    calls = answer.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["add", "echo"]  # type: ignore[union-attr]
    span = only_span(tracecard.url, run["id"])
    attrs = span["attributes"]
    assert span["name"] == "chat script-tools"
    assert span["trace_id"] == run["trace_id"] and span["parent_span_id"] == run["root_span_id"]
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "script-tools"
    assert attrs["gen_ai.response.id"] == answer.id
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert answer.usage is not None
    assert attrs["gen_ai.usage.input_tokens"] == answer.usage.prompt_tokens
    assert attrs["gen_ai.usage.output_tokens"] == answer.usage.completion_tokens
    assert orjson.loads(attrs["tracecard.llm.tool_calls"]) == [
        {"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 40}},
        {"id": "call_echo", "name": "echo", "arguments": {"text": "hi"}},
    ]
    assert orjson.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 2 + 40?"}]}
    ]
    assert orjson.loads(attrs["gen_ai.tool.definitions"])[0]["name"] == "add"
    output = orjson.loads(attrs["gen_ai.output.messages"])
    assert output[0]["finish_reason"] == "tool_calls"
    assert [p["type"] for p in output[0]["parts"]] == ["tool_call", "tool_call"]
    # the agent's key went to the model and is stored redacted
    assert attrs["http.request.header.authorization"] == "[REDACTED]"
    assert "sk-agent-key" not in orjson.dumps(attrs).decode()
    assert model.received[-1]["headers"]["authorization"] == "Bearer sk-agent-key"


def test_streamed_tool_call_deltas_are_reassembled(
    model: ModelUpstream, tracecard: RunningServer
) -> None:
    run = new_run(tracecard.url)
    stream = openai_client(run).chat.completions.create(
        model="script-tools",
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},  # type: ignore[arg-type]
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None
    attrs = only_span(tracecard.url, run["id"])["attributes"]
    assert attrs["tracecard.llm.stream"] is True and attrs["tracecard.llm.stream.complete"] is True
    assert [c["arguments"] for c in orjson.loads(attrs["tracecard.llm.tool_calls"])] == [
        {"a": 2, "b": 40},
        {"text": "hi"},
    ]
    assert attrs["gen_ai.usage.input_tokens"] == chunks[-1].usage.prompt_tokens
    assert attrs["gen_ai.usage.output_tokens"] == chunks[-1].usage.completion_tokens
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attrs["tracecard.llm.time_to_first_token_ms"] >= 0
    assert "error.type" not in attrs


def test_streamed_text_and_a_refusal(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    client = openai_client(run)
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model="script-text", messages=USER, stream=True)  # type: ignore[arg-type]
        if c.choices
    )
    assert text == "Hello from the script."
    refused = client.chat.completions.create(model="script-refusal", messages=USER)  # type: ignore[arg-type]
    assert refused.choices[0].message.refusal == "I can't help with that."
    spans = model_spans(tracecard.url, run["id"])
    parts = [orjson.loads(s["attributes"]["gen_ai.output.messages"])[0]["parts"] for s in spans]
    assert parts == [
        [{"type": "text", "content": "Hello from the script."}],
        [{"type": "refusal", "content": "I can't help with that."}],
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_responses_api(tracecard: RunningServer, stream: bool) -> None:
    run = new_run(tracecard.url)
    client = openai_client(run)
    if stream:
        events = list(client.responses.create(model="script-tools", input="hi", stream=True))
        response_id = events[-1].response.id  # type: ignore[union-attr]
    else:
        response_id = client.responses.create(
            model="script-tools", input="hi", instructions="Be brief."
        ).id
    attrs = only_span(tracecard.url, run["id"])["attributes"]
    assert attrs["tracecard.llm.api"] == "responses"
    assert attrs["gen_ai.response.id"] == response_id
    assert [c["name"] for c in orjson.loads(attrs["tracecard.llm.tool_calls"])] == ["add", "echo"]
    assert attrs["gen_ai.usage.output_tokens"] == 7
    assert orjson.loads(attrs["gen_ai.input.messages"])[0]["parts"][0]["content"] == "hi"
    if not stream:
        assert orjson.loads(attrs["gen_ai.system_instructions"]) == [
            {"type": "text", "content": "Be brief."}
        ]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages(model: ModelUpstream, tracecard: RunningServer, stream: bool) -> None:
    run = new_run(tracecard.url)
    client = claude_client(run)
    request: dict[str, Any] = {
        "model": "script-tools",
        "max_tokens": 64,
        "messages": USER,
        "system": "Use tools.",
    }
    if stream:
        with client.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**request)
    span = only_span(tracecard.url, run["id"])
    attrs = span["attributes"]
    assert span["name"] == "chat script-tools"
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.response.id"] == message.id
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert attrs["gen_ai.usage.input_tokens"] == message.usage.input_tokens
    assert attrs["gen_ai.usage.output_tokens"] == message.usage.output_tokens
    assert orjson.loads(attrs["tracecard.llm.tool_calls"]) == [
        {"id": "toolu_call_add", "name": "add", "arguments": {"a": 2, "b": 40}},
        {"id": "toolu_call_echo", "name": "echo", "arguments": {"text": "hi"}},
    ]
    assert orjson.loads(attrs["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Use tools."}
    ]
    sent = model.received[-1]["headers"]  # the SDK's key header (x-api-key or a bearer token)
    key_header = next(name for name, value in sent.items() if "sk-ant-key" in value)
    assert attrs[f"http.request.header.{key_header}"] == "[REDACTED]"


@pytest.mark.parametrize(
    ("script", "error"),
    [("script-429", openai.RateLimitError), ("script-500", openai.InternalServerError)],
)
def test_upstream_errors_pass_through_and_are_recorded(
    tracecard: RunningServer, script: str, error: type[Exception]
) -> None:
    run = new_run(tracecard.url)
    with pytest.raises(error):
        openai_client(run).chat.completions.create(model=script, messages=USER)  # type: ignore[arg-type]
    span = only_span(tracecard.url, run["id"])
    attrs = span["attributes"]
    status = script.split("-")[1]
    assert attrs["error.type"] == status and attrs["http.response.status_code"] == int(status)
    assert span["status"]["code"] == 2
    assert (
        "error processing" in attrs["tracecard.llm.error.message"]
        or "Rate limit" in attrs["tracecard.llm.error.message"]
    )
    assert (
        orjson.loads(attrs["tracecard.response.body"])["error"]["message"]
        == attrs["tracecard.llm.error.message"]
    )


@pytest.mark.parametrize("provider", ["openai", "claude"])
def test_a_stream_cut_mid_tool_call_is_recorded_as_such(
    tracecard: RunningServer, provider: str
) -> None:
    run = new_run(tracecard.url)
    with pytest.raises((openai.APIConnectionError, anthropic.APIConnectionError, httpx2.HTTPError)):
        if provider == "openai":
            list(
                openai_client(run).chat.completions.create(
                    model="script-cut", messages=USER, stream=True
                )
            )  # type: ignore[arg-type]
        else:
            with claude_client(run).messages.stream(
                model="script-cut", max_tokens=9, messages=USER
            ) as events:  # type: ignore[arg-type]
                events.get_final_message()
    attrs = only_span(tracecard.url, run["id"])["attributes"]
    assert attrs["error.type"] == "upstream_protocol_error"
    assert attrs["tracecard.llm.stream.complete"] is False
    calls = orjson.loads(attrs["tracecard.llm.tool_calls"])
    assert [c["name"] for c in calls] == ["add", "echo"]
    assert "complete" not in calls[0] and calls[1]["complete"] is False
    assert isinstance(calls[1]["arguments"], str)  # half an object, kept as the text received


def test_a_non_json_body_is_recorded_raw(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    response = httpx.post(
        f"{run['urls']['openai']}/chat/completions",
        json={"model": "script-notjson", "messages": USER},
    )
    assert response.text == "<html><body>gateway says hi</body></html>"
    attrs = only_span(tracecard.url, run["id"])["attributes"]
    assert attrs["tracecard.response.body"] == response.text
    assert "not valid JSON" in attrs["tracecard.parse_error"]
    assert "gen_ai.output.messages" not in attrs


@pytest.mark.parametrize("where", ["header", "baggage"])
def test_run_from_header_or_baggage(tracecard: RunningServer, where: str) -> None:
    run = new_run(tracecard.url)
    header = (
        {"Tracecard-Run": run["id"]}
        if where == "header"
        else {"baggage": f"tracecard.run={run['id']}"}
    )
    client = openai.OpenAI(
        base_url=f"{tracecard.url}/llm/openai", api_key="k", default_headers=header
    )
    client.chat.completions.create(model="script-text", messages=USER)  # type: ignore[arg-type]
    assert only_span(tracecard.url, run["id"])["attributes"]["tracecard.run.id"] == run["id"]


def test_wrong_kind_of_path_is_404_naming_the_right_one(tracecard: RunningServer) -> None:
    answer = httpx.post(f"{tracecard.url}/mcp/openai", json={})
    assert answer.status_code == 404 and "/llm/openai/" in answer.json()["detail"]


def test_tracecard_token_is_never_forwarded(model: ModelUpstream, tracecard: RunningServer) -> None:
    httpx.post(
        f"{tracecard.url}/llm/openai/chat/completions",
        json={"model": "script-text", "messages": USER},
        headers={"Tracecard-Token": "tracecard-secret"},
    )
    assert "tracecard-token" not in model.received[-1]["headers"]


def test_agents_get_the_model_urls_in_their_environment() -> None:
    from pathlib import Path

    from tracecard.client import RunHandle
    from tracecard.server.orchestration.agents import agent_environment

    urls = {
        "tools": "http://h/runs/r1/mcp/tools",
        "gpt": "http://h/runs/r1/llm/gpt",
        "claude": "http://h/runs/r1/llm/claude",
        "claude-b": "http://h/runs/r1/llm/claude-b",
    }
    models = {"gpt": "openai", "claude": "anthropic", "claude-b": "anthropic"}
    run = RunHandle(id="r1", task_id="t", trial=0, instruction="", urls=urls, models=models)
    env = agent_environment(
        run,
        server_url="http://h",
        experiment_id="e",
        config_name="c",
        answer_file=Path("a"),
        base={},
    )
    assert env["TRACECARD_LLM_URL_GPT"] == urls["gpt"]
    assert env["TRACECARD_LLM_URL_CLAUDE_B"] == urls["claude-b"]
    assert env["OPENAI_BASE_URL"] == urls["gpt"]
    assert "ANTHROPIC_BASE_URL" not in env  # two Anthropic upstreams: the agent must choose
    assert env["TRACECARD_MCP_URL"] == urls["tools"]  # model upstreams are not tool servers


def test_runs_list_their_model_upstreams(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    assert run["models"] == {"openai": "openai", "claude": "anthropic", "down": "openai"}
    assert run["urls"]["openai"] == f"{tracecard.url}/runs/{run['id']}/llm/openai"


def test_an_unreachable_model_is_a_502_and_a_span(tracecard: RunningServer) -> None:
    run = new_run(tracecard.url)
    answer = httpx.post(
        f"{run['urls']['down']}/chat/completions", json={"model": "m", "messages": USER}
    )
    assert answer.status_code == 502 and "'down' is unavailable" in answer.json()["detail"]
    span = only_span(tracecard.url, run["id"])
    assert span["attributes"]["error.type"] == "upstream_unavailable"
    assert span["name"] == "chat m" and span["status"]["code"] == 2


def test_with_an_api_token_the_model_key_and_the_token_travel_apart(
    model: ModelUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    upstreams = {"openai": {"url": f"{model.url}/v1", "kind": "openai"}}
    folder = tmp_path_factory.mktemp("llm-token")
    with tracecard_for(upstreams, folder, api_token="tc-secret") as running:
        base = f"{running.url}/llm/openai"
        token = {"Tracecard-Token": "tc-secret"}
        client = openai.OpenAI(base_url=base, api_key="sk-model", default_headers=token)
        client.chat.completions.create(model="script-text", messages=USER)  # type: ignore[arg-type]
        sent = model.received[-1]["headers"]
        assert sent["authorization"] == "Bearer sk-model" and "tracecard-token" not in sent
        # a local model that needs no key: the tracecard token as the bearer is not forwarded
        keyless = openai.OpenAI(base_url=base, api_key="tc-secret", max_retries=0)
        keyless.chat.completions.create(model="script-text", messages=USER)  # type: ignore[arg-type]
        assert "authorization" not in model.received[-1]["headers"]
        refused = openai.OpenAI(base_url=base, api_key="sk-model", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            refused.chat.completions.create(model="script-text", messages=USER)  # type: ignore[arg-type]
