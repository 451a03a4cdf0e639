"""A real model in the loop: the helpdesk suite played by a pydantic-ai agent whose model is a
real model server (llama-server, ../shared/local-model/), through tracecard on both wires.

Starts tracecard in process (SQLite in a temporary folder) with the helpdesk as a per-run stdio
upstream and the model server as two model upstreams: `llm-openai` (`kind = "openai"`, Chat
Completions at `{url}`) and `llm-anthropic` (`kind = "anthropic"`, Messages at the server's root
`/v1/messages`; llama-server answers both). Each chosen task runs once per wire and per mode
(streamed or not) as one run of an experiment: the agent (pydantic-ai `OpenAIChatModel` or
`AnthropicModel`, `MCPToolset` on the run's `/mcp/helpdesk` URL) gets the task's instruction,
its output is sent as the final answer, the run is finished and scored.

Reported per run: the scores (outcome, completion, invocation, efficiency, composite), the run
time, the tokens and model requests recorded (answered and failed), and anything recorded wrong,
checked against what the agent itself saw:
- `traces`: the run's spans are in one trace;
- `requests`, `tokens`, `tool_calls`: pydantic-ai's own usage (requests, input/output tokens,
  tool calls) equals what the spans say (runs that completed);
- `answer`: the model's last answer in the trace is the agent's output;
- `links`: every tool span the agent ran carries `gen_ai.tool.call.id` and a link to a model span
  that requested that id;
- `redacted`: no helpdesk argument is stored as a fingerprint (the helpdesk holds no secrets);
- failed model requests are listed with their `error.type` and message (the model server's own
  500s are recorded as such).

Skips (exit status 0, one line saying why) when no model server is configured: `--model-url` or
`TRACECARD_REAL_MODEL_URL` (e.g. `http://127.0.0.1:8093/v1`), or when it does not answer.

Run:  .venv/bin/python bench/real_model.py --model-url http://127.0.0.1:8093/v1 \\
          [--tasks count-urgent,close-vpn] [--wires openai,anthropic] [--modes json,stream] \\
          [--run-timeout 240] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import tomllib
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic_ai import Agent, RunContext  # noqa: E402
from pydantic_ai.mcp import MCPToolset  # noqa: E402
from pydantic_ai.messages import AgentStreamEvent  # noqa: E402
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402
from pydantic_ai.usage import UsageLimits  # noqa: E402

from bench.proxy_overhead import machine  # noqa: E402
from tests.support.proxy import run_spans, tracecard_for  # noqa: E402
from tracecard.scorers.calls import agent_calls  # noqa: E402
from tracecard.scorers.model import model_answer, model_turns  # noqa: E402
from tracecard.traces import semconv as sc  # noqa: E402

HELPDESK = ROOT / "examples" / "helpdesk"
WIRES = {"openai": "llm-openai", "anthropic": "llm-anthropic"}
INSTRUCTIONS = (
    "You are a helpdesk agent. Use the helpdesk tools to do what the user asks; do not change "
    "anything you were not asked to change. When you are done, answer the user in one or two "
    "sentences."
)


def configured_url(given: str | None) -> str | None:
    return given or os.environ.get("TRACECARD_REAL_MODEL_URL") or None


def served_model(url: str) -> str | None:
    """The model the server serves (`GET {url}/models`), None when it does not answer."""
    try:
        models = httpx.get(f"{url}/models", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return None
    data = models.get("data") or [{}]
    return str(data[0].get("id") or "model")


def suite_for(tasks: list[str], name: str) -> dict[str, Any]:
    """The helpdesk suite (JSON form) with only `tasks`, each allowed both model upstreams."""
    suite = tomllib.loads((HELPDESK / "suite.toml").read_text())
    known = [t["id"] for t in suite["tasks"]]
    missing = [t for t in tasks if t not in known]
    if missing:
        raise SystemExit(f"real_model: no task {missing} in the helpdesk suite ({known})")
    suite["name"] = name
    suite["tasks"] = [t for t in suite["tasks"] if t["id"] in tasks]
    for task in suite["tasks"]:
        task["upstreams"] = [*task.get("upstreams", []), *WIRES.values()]
    return suite


def agent_for(wire: str, model: str, base: str, run_id: str) -> Agent[None, str]:
    llm = f"{base}/runs/{run_id}/llm/{WIRES[wire]}"
    # a per-run stdio helpdesk starts slowly on a loaded machine (the default wait is 5 s)
    toolset = MCPToolset(f"{base}/runs/{run_id}/mcp/helpdesk", init_timeout=60, read_timeout=120)
    if wire == "openai":
        chat = OpenAIChatModel(model, provider=OpenAIProvider(base_url=llm, api_key="sk-local"))
        return Agent(chat, toolsets=[toolset], instructions=INSTRUCTIONS)
    messages = AnthropicModel(model, provider=AnthropicProvider(base_url=llm, api_key="sk-local"))
    return Agent(messages, toolsets=[toolset], instructions=INSTRUCTIONS)


async def _drain(_: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
    async for _event in events:
        pass


async def play(
    agent: Agent[None, str], instruction: str, stream: bool, timeout: float
) -> dict[str, Any]:
    """Run the agent once; what it saw (output, usage) or how it failed."""
    started = time.perf_counter()
    seen: dict[str, Any] = {}
    try:
        async with asyncio.timeout(timeout), agent:
            result = await agent.run(
                instruction,
                usage_limits=UsageLimits(request_limit=10),
                event_stream_handler=_drain if stream else None,
            )
        usage = result.usage
        seen = {
            "output": result.output,
            "requests": usage.requests,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "tool_calls": usage.tool_calls,
        }
    except Exception as exc:  # noqa: BLE001  # a real model fails in many ways: all reported
        seen = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    seen["seconds"] = round(time.perf_counter() - started, 2)
    return seen


def recorded_wrong(spans: list[dict[str, Any]], seen: dict[str, Any]) -> list[str]:
    """What the trace says that the agent did not see (or the other way round)."""
    wrong: list[str] = []
    if len({s["trace_id"] for s in spans}) != 1:
        wrong.append(f"traces: {len({s['trace_id'] for s in spans})} trace ids")
    turns = model_turns(spans)
    answered = [t for t in turns if not t.failed]
    calls = agent_calls(spans)
    if "error" not in seen:
        pairs = [
            ("requests", len(answered), seen["requests"]),
            ("input_tokens", sum(t.input_tokens or 0 for t in answered), seen["input_tokens"]),
            ("output_tokens", sum(t.output_tokens or 0 for t in answered), seen["output_tokens"]),
            # pydantic-ai counts a tool call in its usage only when it succeeded (a tool error
            # becomes a retry prompt), so only the calls that did are compared with it
            ("tool_calls", len([c for c in calls if not c.is_error]), seen["tool_calls"]),
        ]
        wrong += [f"{k}: recorded {r}, agent saw {a}" for k, r, a in pairs if r != a]
        found = model_answer(turns)
        if found is None or found[0] != str(seen["output"]).strip():
            wrong.append(f"answer: recorded {found[0][:60] if found else None!r}")
    requested = {req.call_id: t.span_id for t in turns for req in t.requested if req.call_id}
    by_id = {s["span_id"]: s for s in spans}
    for call in calls:
        span = by_id[call.span_id]
        call_id = span["attributes"].get(sc.GEN_AI_TOOL_CALL_ID)
        targets = [link["span_id"] for link in span.get("links") or []]
        if call_id is None or requested.get(call_id) not in targets:
            asked = [
                (req.arguments, (call.start_ns - t.end_ns) / 1e6)
                for t in turns
                for req in t.requested
                if req.tool == call.tool
            ]
            wrong.append(
                f"links: {call.tool} ({call.span_id[:6]}) id {call_id!r} -> {targets}; ran "
                f"{call.arguments or call.raw_arguments}, asked (arguments, ms before) {asked}"
            )
        if "[redacted:" in str(span["attributes"].get(sc.GEN_AI_TOOL_CALL_ARGUMENTS)):
            wrong.append(f"redacted: {call.tool} arguments hold a fingerprint")
    return wrong


def run_row(
    task: str,
    wire: str,
    mode: str,
    finished: dict[str, Any],
    spans: list[dict[str, Any]],
    seen: dict[str, Any],
) -> dict[str, Any]:
    scores = {s["component"]: s for s in finished.get("scores", [])}
    efficiency = (scores.get("efficiency") or {}).get("evidence") or {}
    failures = [
        {
            "error.type": t.error_type,
            "message": next(
                (s["status"]["message"] for s in spans if s["span_id"] == t.span_id), ""
            )[:160],
        }
        for t in model_turns(spans)
        if t.failed
    ]
    return {
        "task": task,
        "wire": wire,
        "mode": mode,
        "status": finished.get("status"),
        "seconds": seen["seconds"],
        "scores": {k: (v["value"], v["passed"]) for k, v in scores.items()},
        "model_turns": efficiency.get("model_turns"),
        "model_errors": efficiency.get("model_errors"),
        "input_tokens": efficiency.get("input_tokens"),
        "output_tokens": efficiency.get("output_tokens"),
        "tool_calls": efficiency.get("calls"),
        "flags": finished.get("flags", []),
        "agent_error": seen.get("error"),
        "model_failures": failures,
        "recorded_wrong": recorded_wrong(spans, seen),
    }


async def one_wire(
    base: str, wire: str, model: str, args: argparse.Namespace, rows: list[dict[str, Any]]
) -> None:
    name = f"helpdesk-real-{wire}-{int(time.time())}"
    suite = suite_for(args.tasks, name)
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        posted = await http.post("/api/suites", json=suite)
        assert posted.status_code == 201, posted.text
        for mode in args.modes:
            config = {"name": f"{model}-{wire}-{mode}", "model": model, "wire": wire}
            body = {"suite": name, "config": config, "trials": 1}
            created = await http.post("/api/experiments", json=body)
            assert created.status_code == 201, created.text
            for run in created.json()["runs"]:
                agent = agent_for(wire, model, base, run["id"])
                seen = await play(agent, run["instruction"], mode == "stream", args.run_timeout)
                finish: dict[str, Any] = {"final_answer": str(seen.get("output") or "")}
                if "error" in seen:
                    finish = {"status": "errored"}
                finished = (await http.post(f"/api/runs/{run['id']}/finish", json=finish)).json()
                spans = await asyncio.to_thread(run_spans, base, run["id"])
                row = run_row(run["task_id"], wire, mode, finished, spans, seen)
                rows.append(row)
                print(json.dumps(row), flush=True)


COLUMNS = "task wire mode status s outcome completion invocation turns errors tokens wrong"


def _score(row: dict[str, Any], name: str) -> str:
    value = row["scores"].get(name)
    return "—" if value is None or value[0] is None else f"{value[0]:.2f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS.split()) + " |", "|" + "---|" * len(COLUMNS.split())]
    for r in rows:
        cells = [
            r["task"],
            r["wire"],
            r["mode"],
            r["status"],
            r["seconds"],
            *(_score(r, c) for c in ("outcome", "completion", "invocation")),
            r["model_turns"],
            r["model_errors"],
            f"{r['input_tokens']}/{r['output_tokens']}",
            "; ".join(r["recorded_wrong"]) or "nothing",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8093/v1"
    )
    parser.add_argument("--model", help="the model name to ask for (default: the server's first)")
    parser.add_argument("--tasks", default="count-urgent,assign-printer,close-vpn")
    parser.add_argument("--wires", default="openai,anthropic")
    parser.add_argument("--modes", default="json,stream", help="json (whole answers) and/or stream")
    parser.add_argument("--run-timeout", type=float, default=240.0, help="seconds per run")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    args.tasks = [t for t in args.tasks.split(",") if t]
    args.modes = [m for m in args.modes.split(",") if m]
    url = configured_url(args.model_url)
    if url is None:
        print(
            "real_model: skipped: no model server configured "
            "(--model-url or TRACECARD_REAL_MODEL_URL)"
        )
        return
    model = args.model or served_model(url.rstrip("/"))
    if model is None:
        print(f"real_model: skipped: the model server at {url} does not answer GET /models")
        return
    root = url.rstrip("/").removesuffix("/v1")
    upstreams: dict[str, dict[str, Any]] = {
        "helpdesk": {
            "command": [sys.executable, str(HELPDESK / "server.py"), "{sandbox}"],
            "per_run": True,
            "fixture": str(HELPDESK / "fixture"),
        },
        WIRES["openai"]: {"url": url.rstrip("/"), "kind": "openai", "timeout_s": 300},
        WIRES["anthropic"]: {"url": root, "kind": "anthropic", "timeout_s": 300},
    }
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, tracecard_for(upstreams, Path(folder)) as running:
        for wire in [w for w in args.wires.split(",") if w]:
            asyncio.run(one_wire(running.url, wire, model, args, rows))
    report = {
        "model": model,
        "machine": machine(),
        "load_average": os.getloadavg(),
        "seconds": round(time.perf_counter() - started, 1),
        "runs": rows,
    }
    print(markdown(rows))
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
