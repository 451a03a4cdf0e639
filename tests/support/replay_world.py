"""A small world for replay tests: the helpdesk MCP server (examples/helpdesk) served in this
process over streamable HTTP, and a plain HTTP knowledge-base tool; both count the requests
they receive, and a scripted pydantic-ai agent (FunctionModel) that uses both."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.tracecard import RunningServer, bound_socket, port_of, running_tracecard, serving
from tracecard.client import AsyncTracecardClient, TracecardClient
from tracecard.server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
HELPDESK = ROOT / "examples" / "helpdesk"

SUITE = """
schema_version = 1
name = "replay-world"

[[tasks]]
id = "assign"
instruction = "Find Dana, assign T-1002 to her, look up the printer article."
upstreams = ["helpdesk", "kb"]
[tasks.invocation]
order = "subsequence"
[[tasks.invocation.calls]]
tool = "find_users"
arguments = { query = "dana" }
[[tasks.invocation.calls]]
tool = "update_ticket"
arguments = { ticket_id = "T-1002", assignee = "u-108" }
[tasks.completion]
checks = [{ contains = "assigned" }]
[tasks.outcome]
predicates = [{ probe = "t", path = "$.structuredContent.assignee", op = "eq", value = "u-108" }]
[[tasks.outcome.probes]]
id = "t"
kind = "tool"
upstream = "helpdesk"
tool = "get_ticket"
arguments = { ticket_id = "T-1002" }

[[tasks]]
id = "count"
instruction = "How many open urgent tickets are there?"
upstreams = ["helpdesk"]
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "list_tickets"
arguments = { status = "open", priority = "urgent" }
[tasks.completion]
checks = [{ number = 2 }]
"""

DESK_SUITE = """
schema_version = 1
name = "replay-desk"

[[tasks]]
id = "count"
instruction = "How many open urgent tickets are there?"
upstreams = ["desk"]
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "list_tickets"
arguments = { status = "open", priority = "urgent" }
[tasks.completion]
checks = [{ number = 2 }]
[tasks.outcome]
predicates = [{ probe = "t", path = "$.structuredContent.status", op = "eq", value = "open" }]
[[tasks.outcome.probes]]
id = "t"
kind = "tool"
upstream = "desk"
tool = "get_ticket"
arguments = { ticket_id = "T-1001" }
"""


class Counting:
    """An ASGI app that counts the HTTP requests it receives, then passes them on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


async def knowledge_base(scope: Any, receive: Any, send: Any) -> None:
    """A plain HTTP tool: POST /lookup {"topic"} -> {"topic", "article"}."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    topic = orjson.loads(body or b"{}").get("topic", "")
    answer = orjson.dumps({"topic": topic, "article": f"KB-{len(topic)}: restart the {topic}"})
    headers = [(b"content-type", b"application/json"), (b"x-kb", b"1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


@contextlib.contextmanager
def helpdesk_http(state_dir: Path) -> Iterator[tuple[str, Counting]]:
    """The helpdesk over streamable HTTP in this process; yields its URL and request counter."""
    shutil.copytree(HELPDESK / "fixture", state_dir, dirs_exist_ok=True)
    sys.path.insert(0, str(HELPDESK))
    import helpdesk

    helpdesk.STATE_DIR = state_dir
    helpdesk.load_state()
    counting = Counting(helpdesk.server.streamable_http_app())
    sock = bound_socket()
    config = uvicorn.Config(counting, log_level="warning", lifespan="on")
    with serving(config, sock, "helpdesk"):
        yield f"http://127.0.0.1:{port_of(sock)}/mcp", counting


@contextlib.contextmanager
def kb_http() -> Iterator[tuple[str, Counting]]:
    counting = Counting(knowledge_base)
    sock = bound_socket()
    config = uvicorn.Config(counting, log_level="warning", lifespan="off")
    with serving(config, sock, "kb"):
        yield f"http://127.0.0.1:{port_of(sock)}", counting


def _script(task: str, query: str) -> list[list[tuple[str, dict[str, Any]]]]:
    if task == "assign":
        return [
            [("find_users", {"query": query})],
            [("update_ticket", {"ticket_id": "T-1002", "assignee": "u-108"})],
            [("kb_lookup", {"topic": "printer"})],
        ]
    return [[("list_tickets", {"status": "open", "priority": "urgent"})]]


def _answer(task: str, messages: list[ModelMessage]) -> str:
    if task == "assign":
        return "assigned T-1002 to Dana"
    text = "".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)
    return "2" if "T-" in text else "unknown"


async def run_agent(run: dict[str, Any], query: str = "dana") -> tuple[str | None, str]:
    """One trial of the scripted agent in `run`; (final answer, status)."""
    steps = _script(run["task_id"], query)

    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(m, ModelResponse) for m in messages)
        if done < len(steps):
            return ModelResponse(parts=[ToolCallPart(t, a) for t, a in steps[done]])
        return ModelResponse(parts=[TextPart(_answer(run["task_id"], messages))])

    kb_url = run["urls"]["kb"]

    async def kb_lookup(topic: str) -> str:
        """Look a topic up in the knowledge base."""
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(f"{kb_url}lookup", json={"topic": topic})
        return response.text

    agent = Agent(
        FunctionModel(respond), toolsets=[MCPToolset(run["urls"]["helpdesk"])], tools=[kb_lookup]
    )
    try:
        async with agent:
            result = await agent.run(run["instruction"])
    except Exception as exc:  # the agent broke (e.g. a replay miss it could not handle)
        return f"{type(exc).__name__}: {exc}", "errored"
    return result.output, "finished"


# a stdio helpdesk that notes each start: `sh -c STARTS <file> python server.py <sandbox>`
STARTS = 'echo start >> "$0"; exec "$@"'
DESK = [sys.executable, str(HELPDESK / "server.py")]


class World:
    """A tracecard in front of the helpdesk (HTTP and stdio) and the knowledge base, with the
    replay suite stored (`suite`) and, once a test ran it, a live source experiment."""

    def __init__(
        self, server: RunningServer, helpdesk: Counting, kb: Counting, starts: Path
    ) -> None:
        self.server, self.helpdesk, self.kb = server, helpdesk, kb
        self.starts = starts  # one line per stdio helpdesk process started
        self.suite = ""
        self.source = ""
        self.db = Path()

    def requests(self) -> int:
        return self.helpdesk.requests + self.kb.requests


@contextlib.contextmanager
def open_world(folder: Path) -> Iterator[World]:
    starts = folder / "starts.txt"
    with helpdesk_http(folder / "state") as (helpdesk_url, helpdesk):
        with kb_http() as (kb_url, kb):
            settings = Settings.model_validate(
                {
                    "db": f"sqlite:///{folder / 'tracecard.db'}",
                    "sandbox_root": str(folder / "sandboxes"),
                    "upstreams": {
                        "helpdesk": {"url": helpdesk_url},
                        "kb": {"url": kb_url, "kind": "http"},
                        "desk": {
                            "command": ["sh", "-c", STARTS, str(starts), *DESK, "{sandbox}"],
                            "per_run": True,
                            "fixture": str(HELPDESK / "fixture"),
                        },
                    },
                    "recording": {"batch_delay_ms": 20},
                }
            )
            with running_tracecard(settings) as server:
                world = World(server, helpdesk, kb, starts)
                world.db = folder / "tracecard.db"
                with TracecardClient(server.url) as client:
                    world.suite = client.add_suite_text(SUITE, "toml")["version"]
                yield world


async def run_all(
    world: World,
    replay: dict[str, Any] | None,
    trials: int,
    query: str = "dana",
    faults: dict[str, Any] | None = None,
) -> tuple[str, dict[str, dict[str, Any]]]:
    """Create an experiment, run the agent in each run, finish it; (id, finish by run id)."""
    async with AsyncTracecardClient(world.server.url) as client:
        experiment = await client.create_experiment(
            world.suite, {"name": "scripted"}, trials, replay=replay, faults=faults
        )
        finished = {}
        for run in experiment.runs:
            handle = {"task_id": run.task_id, "instruction": run.instruction, "urls": run.urls}
            answer, status = await run_agent(handle, query)
            finished[run.id] = await client.finish_run(run.id, final_answer=answer, status=status)
    return experiment.id, finished


def scores_of(client: TracecardClient, experiment: str) -> dict[tuple[str, int], Any]:
    """{(task, trial): {component: (value, passed)}} of an experiment's runs."""
    found = {}
    for run in client.get_experiment(experiment)["runs"]:
        view = client.get_run(run["id"])
        scores = {s["component"]: (s["value"], s["passed"]) for s in view["scores"]}
        found[(run["task_id"], run["trial"])] = scores
    return found


def spans_of(world: World, run_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{world.server.url}/api/runs/{run_id}/spans", timeout=30)
    spans: list[dict[str, Any]] = response.json()["spans"]
    return spans


def proxied(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans of messages that crossed the proxy (not the root, probes or turns)."""
    return [
        s
        for s in spans
        if ("mcp.method.name" in s["attributes"] or "http.request.method" in s["attributes"])
        and "tracecard.probe.id" not in s["attributes"]
    ]
