"""A scripted helpdesk agent built on pydantic-ai, for `tracecard run` and `tracecard demo`.

The agent is real pydantic-ai: an `Agent` with an `MCPToolset` pointed at the run's proxy URL,
driven by a `FunctionModel` whose "decisions" come from a script (helpdesk_scripts.py) chosen by
`--style careful|hasty`, the task id and a seed. So it needs no API key, costs nothing, and runs
are reproducible: trial N of a task always behaves the same way.

It reads everything from the environment that `tracecard run` sets (docs/agents.md):

    tracecard run --suite examples/helpdesk/suite.toml --config hasty --trials 5 \\
        --agent 'python examples/agents/helpdesk_agent.py --style hasty'

and writes its final answer to $TRACECARD_ANSWER_FILE (and to stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helpdesk_scripts import Pause, Script, script_for  # a sibling module of this script
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

UPSTREAM = "helpdesk"


def _tool_results(messages: list[ModelMessage]) -> list[Any]:
    """The results of the calls made in the previous step, in the order they were made."""
    last = messages[-1]
    if not isinstance(last, ModelRequest):
        return []
    results: list[Any] = []
    for part in last.parts:
        if part.part_kind in ("tool-return", "retry-prompt"):
            content = part.content
            if isinstance(content, str):
                try:
                    content = json.loads(content)
                except ValueError:
                    pass
            results.append(content)
    return results


def scripted_model(script: Script) -> FunctionModel:
    """A pydantic-ai model whose every response is the script's next step."""
    started = False
    counter = 0

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal started, counter
        reply: Any = None if not started else _tool_results(messages)
        started = True
        try:
            step = script.send(reply) if reply is not None else next(script)
            while isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
                step = script.send(None)
        except StopIteration as done:
            return ModelResponse(parts=[TextPart(str(done.value))])
        parts = []
        for tool, arguments in step:
            counter += 1
            parts.append(ToolCallPart(tool, arguments, tool_call_id=f"call_{counter}"))
        return ModelResponse(parts=parts)

    return FunctionModel(respond, model_name="scripted-helpdesk")


def upstream_url(env: Mapping[str, str], name: str = UPSTREAM) -> str:
    """The run's proxy URL for an upstream, from the environment tracecard sets."""
    direct = env.get(f"TRACECARD_UPSTREAM_{name.upper()}")
    if direct:
        return direct
    urls = json.loads(env.get("TRACECARD_UPSTREAMS", "{}"))
    if name not in urls:
        raise SystemExit(f"no URL for upstream {name!r}: is this running under tracecard run?")
    return str(urls[name])


async def run_helpdesk_agent(env: Mapping[str, str], style: str, seed: int = 0) -> str:
    """Run one trial as described by the tracecard environment; returns the final answer."""
    task_id = env.get("TRACECARD_TASK_ID", "")
    trial = int(env.get("TRACECARD_TRIAL", "0"))
    headers = {}
    if env.get("TRACECARD_API_TOKEN"):
        headers["Tracecard-Token"] = env["TRACECARD_API_TOKEN"]
    toolset: MCPToolset[None] = MCPToolset(
        upstream_url(env),
        id=UPSTREAM,
        headers=headers or None,
        tool_error_behavior="retry",
        init_timeout=60,  # per-run servers can take seconds to start (docs/agents.md)
    )
    agent = Agent(
        scripted_model(script_for(task_id, style, trial, seed)),
        toolsets=[toolset],
        instructions="You are a helpdesk agent. Use the helpdesk tools when a task needs them.",
        retries=2,
    )
    result = await agent.run(env.get("TRACECARD_INSTRUCTION", ""))
    return str(result.output)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: one trial, configured by the environment."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=["careful", "hasty"], required=True)
    parser.add_argument("--seed", type=int, default=0, help="varies the trials (default 0)")
    args = parser.parse_args(argv)
    answer = asyncio.run(run_helpdesk_agent(os.environ, args.style, args.seed))
    answer_file = os.environ.get("TRACECARD_ANSWER_FILE")
    if answer_file:
        Path(answer_file).write_text(answer, encoding="utf-8")
    print(answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
