"""Fault plans (docs/replay.md): seeded rules on the agent's calls, through the MCP proxy, the
plain HTTP proxy and the stdio bridge, against the helpdesk MCP server and a plain HTTP tool.
The same seed faults the same calls; each kind is the documented error on the agent's side and
on its span; a retrying agent recovers, a giving-up one does not; probes never see a fault."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from rich.console import Console

from tests.support.replay_world import DESK_SUITE, HELPDESK, SUITE, helpdesk_http, kb_http
from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.client import TracecardClient, TracecardError
from tracecard.server.cli.main import main
from tracecard.server.cli.run_output import print_summary
from tracecard.server.settings import Settings


class World:
    def __init__(self, server: RunningServer) -> None:
        self.server = server
        with TracecardClient(server.url) as client:
            self.suite = client.add_suite_text(SUITE, "toml")["version"]
            self.desk = client.add_suite_text(DESK_SUITE, "toml")["version"]

    def run(self, rules: list[dict[str, Any]], seed: int = 7, suite: str = "") -> Any:
        """A one-trial experiment under `rules`; its `count` run (or the desk suite's)."""
        with TracecardClient(self.server.url) as client:
            experiment = client.create_experiment(
                suite or self.suite, {"name": "faults"}, 1, faults={"seed": seed, "rules": rules}
            )
        return next(r for r in experiment.runs if r.task_id == "count")

    def spans(self, run_id: str) -> list[dict[str, Any]]:
        with TracecardClient(self.server.url) as client:
            client.finish_run(run_id, final_answer="done")
        response = httpx.get(f"{self.server.url}/api/runs/{run_id}/spans", timeout=30)
        return [s for s in response.json()["spans"] if "tracecard.fault.kind" in s["attributes"]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("faults")
    with helpdesk_http(folder / "state") as (helpdesk_url, _), kb_http() as (kb_url, _kb):
        settings = Settings.model_validate(
            {
                "db": f"sqlite:///{folder / 'tracecard.db'}",
                "sandbox_root": str(folder / "sandboxes"),
                "upstreams": {
                    "helpdesk": {"url": helpdesk_url},
                    "kb": {"url": kb_url, "kind": "http"},
                    "desk": {
                        "command": [sys.executable, str(HELPDESK / "server.py"), "{sandbox}"],
                        "per_run": True,
                        "fixture": str(HELPDESK / "fixture"),
                    },
                },
                "recording": {"batch_delay_ms": 20},
            }
        )
        with running_tracecard(settings) as server:
            yield World(server)


async def _calls(url: str, count: int) -> list[bool]:
    """`count` calls of list_tickets; which of them came back as tool errors."""
    async with Client(url) as client:
        results = [
            await client.call_tool("list_tickets", {"status": "open", "page": i})
            for i in range(count)
        ]
    return [r.is_error for r in results]


async def test_the_same_seed_faults_the_same_calls(world: World) -> None:
    rule = {"kind": "tool_error", "upstream": "helpdesk", "probability": 0.5}
    seen = []
    for seed in (7, 7, 8):
        run = world.run([rule], seed)
        seen.append(await _calls(run.urls["helpdesk"], 12))
    assert seen[0] == seen[1]
    assert 0 < sum(seen[0]) < 12 and seen[2] != seen[0]


async def test_each_fault_kind_is_the_documented_error(world: World) -> None:
    one = {"upstream": "helpdesk", "tool": "get_ticket", "nth": 1}
    ticket = {"ticket_id": "T-1001"}

    async def first_call(rule: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        run = world.run([{**one, **rule}])
        async with Client(run.urls["helpdesk"]) as client:
            try:
                result: Any = await client.call_tool("get_ticket", ticket)
            except MCPError as exc:
                result = exc.error
            except RuntimeError as exc:  # the SDK checks a result against the output schema
                result = exc
            again = await client.call_tool("get_ticket", ticket)  # nth = 1: the next is real
        assert not again.is_error and again.structured_content["id"] == "T-1001"
        (span,) = world.spans(run.id)
        assert span["attributes"]["tracecard.fault.rule"] == "rule-1"
        assert span["attributes"]["tracecard.fault.kind"] == rule["kind"]
        return result, span["attributes"]

    result, span = await first_call({"kind": "latency_ms", "ms": 300})
    assert not result.is_error
    result, span = await first_call({"kind": "timeout"})
    assert result.code == -32000 and "did not answer" in result.message
    assert span["error.type"] == "timeout"
    result, span = await first_call({"kind": "jsonrpc_error", "code": -32099, "message": "boom"})
    assert (result.code, result.message) == (-32099, "boom") and span["error.type"] == "-32099"
    result, span = await first_call({"kind": "tool_error", "message": "flaky, try again"})
    assert result.is_error and result.content[0].text == "flaky, try again"
    assert span["error.type"] == "tool_error"
    # the SDK client refuses a result without the structured content its schema promises
    result, span = await first_call({"kind": "truncate", "keep": 5})
    assert "did not return structured content" in str(result)
    cut = json.loads(span["gen_ai.tool.call.result"])
    assert len(cut["content"][0]["text"]) == 5 and "structuredContent" not in cut
    result, span = await first_call({"kind": "corrupt"})
    assert set(result.structured_content) == {"unexpected"}
    wrong = json.loads(span["gen_ai.tool.call.result"])["structuredContent"]
    assert set(wrong) == {"unexpected"} and "T-1001" in wrong["unexpected"]


async def test_listing_faults_drop_and_change_tools(world: World) -> None:
    listed = {}
    for kind, tool in (("drop_tool", "delete_*"), ("schema_change", "get_ticket")):
        run = world.run([{"kind": kind, "upstream": "helpdesk", "tool": tool}])
        async with Client(run.urls["helpdesk"]) as client:
            listed[kind] = {t.name: t for t in (await client.list_tools()).tools}
        (span,) = world.spans(run.id)
        assert span["name"] == "tools/list" and span["attributes"]["tracecard.fault.kind"] == kind
    dropped, changed = listed["drop_tool"], listed["schema_change"]
    assert "delete_ticket" not in dropped and "delete_file" not in dropped
    assert "find_users" in dropped and "delete_ticket" in changed
    assert list(changed["get_ticket"].input_schema["properties"]) == ["ticket_id_v2"]
    assert list(changed["find_users"].input_schema["properties"]) == ["query", "team"]


def test_http_status_and_plain_http_faults(world: World) -> None:
    run = world.run(
        [
            {"kind": "http_status", "upstream": "helpdesk", "status": 429, "retry_after": 2},
            {"kind": "http_status", "upstream": "kb", "status": 503, "nth": 1},
            {"kind": "truncate", "upstream": "kb", "tool": "POST /lookup", "keep": 9, "nth": 2},
        ]
    )
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}
    limited = httpx.post(run.urls["helpdesk"], json=call, timeout=30)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    unavailable = httpx.post(f"{run.urls['kb']}lookup", json={"topic": "vpn"}, timeout=30)
    assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == "1"
    cut = httpx.post(f"{run.urls['kb']}lookup", json={"topic": "vpn"}, timeout=30)
    assert cut.status_code == 200 and cut.content == b'{"topic":'
    spans = world.spans(run.id)
    assert [s["attributes"].get("error.type") for s in spans] == ["429", "503", None]


async def test_the_stdio_bridge_applies_faults_too(world: World) -> None:
    run = world.run([{"kind": "tool_error", "upstream": "desk", "nth": 2}], suite=world.desk)
    assert await _calls(run.urls["desk"], 3) == [False, True, False]
    (span,) = world.spans(run.id)
    assert span["attributes"]["error.type"] == "tool_error"
    assert span["attributes"]["network.transport"] == "pipe"


def _agent(url: str, retries: bool) -> Agent[None, str]:
    """Counts urgent tickets; on a tool error it asks again (`retries`) or gives up."""

    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        calls = sum(isinstance(m, ModelResponse) for m in messages)
        last = messages[-1]
        failed = isinstance(last, ModelRequest) and any(  # an error, as the model reads it
            isinstance(p, RetryPromptPart) or "unavailable" in str(getattr(p, "content", ""))
            for p in last.parts
        )
        if calls == 0 or (failed and retries and calls < 3):
            call = ToolCallPart("list_tickets", {"status": "open", "priority": "urgent"})
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("unknown" if failed else "2")])

    return Agent(FunctionModel(respond), toolsets=[MCPToolset(url, max_retries=3)])


async def test_a_retrying_agent_recovers_and_a_giving_up_one_does_not(world: World) -> None:
    rule = {
        "kind": "tool_error",
        "upstream": "helpdesk",
        "tool": "list_tickets",
        "nth": 1,
        "message": "service unavailable, try again",
    }
    with TracecardClient(world.server.url) as client:
        experiment = client.create_experiment(
            world.suite, {"name": "retry"}, 2, faults={"seed": 7, "rules": [rule]}
        )
    outcomes = {}
    for run in experiment.runs:
        retries = run.trial == 0
        answer = "assigned"
        if run.task_id == "count":
            async with _agent(run.urls["helpdesk"], retries) as agent:
                answer = (await agent.run("How many open urgent tickets?")).output
        with TracecardClient(world.server.url) as client:
            finished = client.finish_run(run.id, final_answer=answer)
        if run.task_id == "count":
            outcomes[retries] = (answer, finished["faults"])
    assert outcomes[True][0] == "2" and outcomes[False][0] == "unknown"
    for retries, (_answer, faults) in outcomes.items():
        assert [(f["kind"], f["tool"], f["recovered"]) for f in faults] == [
            ("tool_error", "list_tickets", retries)
        ]
    with TracecardClient(world.server.url) as client:
        robust = client.robustness(experiment.id)
    assert robust["kinds"] == [
        {
            "kind": "tool_error",
            "faulted_calls": 2,
            "recovered_calls": 1,
            "runs": 2,
            "recovered_runs": 1,
        }
    ]
    assert robust["lines"] == [
        "after tool_error the agent recovered in 1/2 trials (1/2 faulted calls)"
    ]
    count = next(t for t in robust["tasks"] if t["task_id"] == "count")
    assert (count["faulted_runs"], count["recovered_runs"]) == (2, 1)


async def test_probes_never_see_faults(world: World) -> None:
    rule = {"kind": "tool_error", "upstream": "*", "tool": "get_ticket"}
    with TracecardClient(world.server.url) as client:
        experiment = client.create_experiment(
            world.suite, {"name": "probe"}, 1, faults={"seed": 1, "rules": [rule]}
        )
        run = next(r for r in experiment.runs if r.task_id == "assign")
        async with Client(run.urls["helpdesk"]) as mcp:
            args = {"ticket_id": "T-1002", "assignee": "u-108"}
            await mcp.call_tool("update_ticket", args)
            faulted = await mcp.call_tool("get_ticket", {"ticket_id": "T-1002"})
        finished = client.finish_run(run.id, final_answer="assigned")
    assert faulted.is_error  # the agent's own get_ticket was faulted ...
    outcome = next(s for s in finished["scores"] if s["component"] == "outcome")
    assert outcome["passed"] is True  # ... the probe's get_ticket was not
    spans = httpx.get(f"{world.server.url}/api/runs/{run.id}/spans", timeout=30).json()["spans"]
    verifier = [s for s in spans if s["attributes"].get("tracecard.role") == "verifier"]
    assert verifier and not any("tracecard.fault.kind" in s["attributes"] for s in verifier)


def test_rules_naming_nothing_are_one_line_errors(world: World, tmp_path: Path) -> None:
    cases = [
        ({"kind": "timeout", "upstream": "helpdsek"}, "no upstream matches 'helpdsek'"),
        ({"kind": "timeout", "tool": "get_tiket"}, "no tool 'get_tiket' on"),
    ]
    with TracecardClient(world.server.url) as client:
        for rule, expected in cases:
            with pytest.raises(TracecardError) as caught:
                client.create_experiment(world.suite, {"name": "x"}, 1, faults={"rules": [rule]})
            assert expected in caught.value.detail and "\n" not in caught.value.detail
    plan = tmp_path / "plan.toml"
    plan.write_text('seed = 7\n[[rules]]\nkind = "explode"\n')
    marker = tmp_path / "agent-ran"
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(SUITE)
    command = [
        str(Path(sys.executable).parent / "tracecard"),
        "run",
        "--server",
        world.server.url,
        "--suite",
        str(suite_file),
        "--name",
        "x",
        "--agent",
        f"touch {marker}",
        "--faults",
        str(plan),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0 and not marker.exists()
    assert len(errors) == 1 and "rules.0.kind" in errors[0], result.stderr


async def test_a_suite_carries_its_own_fault_plan_per_task(world: World) -> None:
    planned = SUITE.replace(
        'name = "replay-world"',
        'name = "faulted-world"\n'
        "[faults]\nseed = 3\n"
        '[[faults.rules]]\nkind = "tool_error"\ntask = "count"\nupstream = "helpdesk"\n',
    )
    with TracecardClient(world.server.url) as client:
        suite = client.add_suite_text(planned, "toml")["version"]
        experiment = client.create_experiment(suite, {"name": "suite-plan"}, 1)
        broken = client.add_suite_text(planned.replace("tool_error", "melt"), "toml")["version"]
        with pytest.raises(TracecardError) as caught:
            client.create_experiment(broken, {"name": "x"}, 1)
    assert "suite 'faulted-world': faults.rules.0.kind" in caught.value.detail
    assert "\n" not in caught.value.detail
    faulted = {}
    for run in experiment.runs:
        faulted[run.task_id] = await _calls(run.urls["helpdesk"], 1)
    assert faulted == {"count": [True], "assign": [False]}


def test_with_faults_vs_without_is_compares_comparison(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scorecard pairs a faulted experiment with the same config's unfaulted one and says
    what `compare WITHOUT WITH` says, in JSON, Markdown and the CLI."""
    rule = {"kind": "tool_error", "upstream": "helpdesk", "tool": "list_tickets"}
    answers = {"count": "2", "assign": "assigned"}
    ids = []
    with TracecardClient(world.server.url) as client:
        for faults in (None, {"seed": 7, "rules": [rule]}):
            experiment = client.create_experiment(world.suite, {"name": "paired"}, 1, faults=faults)
            for run in experiment.runs:
                answer = answers[run.task_id] if faults is None else "unknown"
                client.finish_run(run.id, final_answer=answer)
            ids.append(experiment.id)
    without, faulted = ids
    base = f"{world.server.url}/api/experiments/{faulted}/scorecard"
    paired = httpx.get(f"{base}.json", timeout=30).json()["robustness"]["without_faults"]
    compared = httpx.get(
        f"{world.server.url}/api/compare",
        params={"a": without, "b": faulted, "component": "outcome"},
        timeout=30,
    ).json()
    assert (paired["a"], paired["b"]) == (without, faulted)
    assert paired["chosen_by"] == "the nearest experiment of 'paired' without faults"
    for key in ("verdict", "reason", "interval", "counts", "tasks"):
        assert paired[key] == compared[key], key
    assert httpx.get(f"{base}.json", timeout=30).json()["schema_version"] == 3
    line = f"with faults vs without ({without}, the nearest experiment of 'paired' without faults)"
    assert line in httpx.get(f"{base}.md", timeout=30).text
    unfaulted = httpx.get(f"{world.server.url}/api/experiments/{without}/scorecard.json")
    assert "robustness" not in unfaulted.json()
    db = world.server.settings.db
    assert main(["compare", without, faulted, "--db", db]) == 0
    printed = capsys.readouterr().out
    assert f"B paired ({faulted[:8]}): {line}" in printed
    summary = io.StringIO()  # what `tracecard run` prints when its runs are done
    with TracecardClient(world.server.url) as client:
        print_summary(Console(file=summary, width=300), client, faulted, [])
    assert line in summary.getvalue() and "fault plan: seed 7, 1 rule(s)" in summary.getvalue()
