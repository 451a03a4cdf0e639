"""Faults on the model side (docs/replay.md, "Model calls"): the fault plan's rules on `/llm/`,
driven by the official `openai` and `anthropic` SDKs against a scripted model upstream. Each
replacing kind is the provider's error shape the SDK raises (or retries) as a real outage, and
is on the call's span; a 429 the SDK retries is `recovered`; a delay passes the answer through;
a rule for every upstream (`*`) leaves the model alone; a kind a model call cannot take is a
one-line error before any run exists."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.servers.model_upstream import ModelUpstream, model_upstream
from tests.support.proxy import tracecard_for
from tests.support.tracecard import RunningServer
from tracecard.client import TracecardClient, TracecardError

SUITE = """
schema_version = 1
name = "model-faults"

[[tasks]]
id = "chat"
instruction = "Say hi."
upstreams = ["openai", "claude"]
"""


class World:
    def __init__(self, server: RunningServer, model: ModelUpstream) -> None:
        self.server, self.model = server, model
        with TracecardClient(server.url) as client:
            self.suite = client.add_suite_text(SUITE, "toml")["version"]

    def run(self, rules: list[dict[str, Any]]) -> Any:
        """The one run of a one-trial experiment under `rules` (seed 7)."""
        with TracecardClient(self.server.url) as client:
            experiment = client.create_experiment(
                self.suite, {"name": "model-faults"}, 1, faults={"seed": 7, "rules": rules}
            )
        return experiment.runs[0]

    def finish(self, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The finish (with its `faults`) and the run's model spans, in order."""
        with TracecardClient(self.server.url) as client:
            finished = client.finish_run(run_id, final_answer="hi")
        url = f"{self.server.url}/api/runs/{run_id}/spans"
        spans = httpx.get(url, timeout=30).json()["spans"]
        return finished, [s for s in spans if "gen_ai.provider.name" in s["attributes"]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with model_upstream() as model:
        upstreams: dict[str, dict[str, Any]] = {
            "openai": {"url": f"{model.url}/v1", "kind": "openai"},
            "claude": {"url": model.url, "kind": "anthropic"},
            "kb": {"url": model.url, "kind": "http"},  # a tool upstream, for `*` to match
        }
        with tracecard_for(upstreams, tmp_path_factory.mktemp("llm-faults")) as server:
            yield World(server, model)


def _chat(url: str, retries: int) -> str:
    with openai.OpenAI(base_url=url, api_key="sk-agent", max_retries=retries) as client:
        answer = client.chat.completions.create(
            model="script-text", messages=[{"role": "user", "content": "Say hi."}]
        )
    return str(answer.choices[0].message.content)


def test_a_429_the_sdk_retries_is_recovered(world: World) -> None:
    rule = {"kind": "http_status", "upstream": "openai", "status": 429, "nth": 1}
    rule |= {"retry_after": 0, "message": "slow down (injected)"}
    run = world.run([rule])
    before = len(world.model.received)
    assert _chat(run.urls["openai"], retries=2)  # the SDK retried after the 429
    assert len(world.model.received) == before + 1  # the upstream saw the retry only
    finished, spans = world.finish(run.id)
    faulted, answered = spans
    assert faulted["attributes"]["tracecard.fault.kind"] == "http_status"
    assert faulted["attributes"]["tracecard.fault.rule"] == "rule-1"
    assert faulted["attributes"]["http.response.status_code"] == 429
    assert faulted["attributes"]["error.type"] == "429"
    assert "tracecard.fault.kind" not in answered["attributes"]
    assert answered["attributes"].get("error.type") is None
    assert [(f["kind"], f["recovered"]) for f in finished["faults"]] == [("http_status", True)]


def test_each_replacing_kind_is_the_providers_error(world: World) -> None:
    cases: list[tuple[dict[str, Any], type[Exception], int, str]] = [
        ({"kind": "timeout"}, openai.InternalServerError, 504, "did not answer in time"),
        ({"kind": "jsonrpc_error", "message": "boom"}, openai.InternalServerError, 500, "boom"),
        ({"kind": "tool_error", "message": "nope"}, openai.InternalServerError, 500, "nope"),
        ({"kind": "http_status", "status": 503}, openai.InternalServerError, 503, "injected"),
    ]
    before = len(world.model.received)
    for fields, error, status, words in cases:
        run = world.run([{"upstream": "openai", **fields}])
        with pytest.raises(error) as raised:
            _chat(run.urls["openai"], retries=0)
        assert raised.value.status_code == status and words in raised.value.message
        _finished, [span] = world.finish(run.id)
        assert span["attributes"]["tracecard.fault.kind"] == fields["kind"]
        expected = "timeout" if fields["kind"] == "timeout" else str(status)
        assert span["attributes"]["error.type"] == expected
    assert len(world.model.received) == before  # a replacing fault never reaches the model

    run = world.run([{"kind": "http_status", "upstream": "claude", "status": 529}])
    with anthropic.Anthropic(base_url=run.urls["claude"], api_key="sk-agent", max_retries=0) as c:
        with pytest.raises(anthropic.APIStatusError) as raised:
            c.messages.create(
                model="script-text", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
    assert raised.value.status_code == 529
    assert raised.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    assert raised.value.response.headers["retry-after"] == "1"


def test_a_delay_passes_the_answer_and_star_leaves_the_model_alone(world: World) -> None:
    run = world.run(
        [
            {"kind": "tool_error", "upstream": "*"},  # every tool upstream: not the model
            {"kind": "latency_ms", "upstream": "open*", "ms": 50},
        ]
    )
    assert _chat(run.urls["openai"], retries=0)
    _finished, [span] = world.finish(run.id)
    assert span["attributes"]["tracecard.fault.kind"] == "latency_ms"
    assert span["attributes"]["tracecard.fault.rule"] == "rule-2"
    assert span["attributes"].get("error.type") is None


def test_a_kind_a_model_call_cannot_take_is_a_one_line_error(world: World) -> None:
    with TracecardClient(world.server.url) as client:
        with pytest.raises(TracecardError) as caught:
            client.create_experiment(
                world.suite,
                {"name": "x"},
                1,
                faults={"rules": [{"kind": "truncate", "upstream": "claude"}]},
            )
    detail = caught.value.detail
    assert "fault rule 'rule-1': truncate does not apply to model upstream claude" in detail
    assert "\n" not in detail


def test_a_fault_over_a_model_replay_comes_before_the_recording(world: World) -> None:
    """The 429 answers instead of the recording, which is not used up: the SDK's retry gets
    the recorded answer, and the model upstream sees nothing."""
    with TracecardClient(world.server.url) as client:
        source = client.create_experiment(world.suite, {"name": "model-faults"}, 1)
        recorded = _chat(source.runs[0].urls["openai"], retries=0)
        client.finish_run(source.runs[0].id, final_answer="hi")
        rule = {"kind": "http_status", "upstream": "openai", "status": 429, "nth": 1}
        experiment = client.create_experiment(
            world.suite,
            {"name": "model-faults"},
            1,
            replay={"source": source.id, "mode": "model"},
            faults={"seed": 7, "rules": [{**rule, "retry_after": 0}]},
        )
    before = len(world.model.received)
    assert _chat(experiment.runs[0].urls["openai"], retries=2) == recorded
    assert len(world.model.received) == before
    finished, (faulted, answered) = world.finish(experiment.runs[0].id)
    assert faulted["attributes"]["tracecard.fault.kind"] == "http_status"
    assert "tracecard.replay" not in faulted["attributes"]
    assert answered["attributes"]["tracecard.replay"] == "recorded"
    assert [(f["kind"], f["recovered"]) for f in finished["faults"]] == [("http_status", True)]
