"""An openai-agents agent for BFCL multi-turn tasks through tracecard: your model, any
OpenAI-compatible endpoint, the BFCL tools through the run's proxy URL, one user turn at a time.

As a `tracecard run` agent (it reads the environment contract of docs/agents.md):

    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=... \\
    tracecard run --suite bfcl.toml --config bfcl.upstreams.toml --name my-model --trials 3 \\
        --agent 'python examples/agents/bfcl_openai_agents.py --model my-model'

It asks tracecard for each user turn (`POST /api/runs/{id}/turns/next`), runs the agent on the
conversation so far plus that message (the agent calls the tools at `TRACECARD_UPSTREAM_BFCL`,
which tracecard records and scores turn by turn), keeps the conversation, and writes the last
answer as its final answer. tests/server/test_bfcl_openai_agents.py runs `play()` with
openai-agents' `ScriptedModel` in place of a real model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from agents import Agent, Model, OpenAIChatCompletionsModel, Runner
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

from tracecard.client import TracecardClient

INSTRUCTIONS = (
    "You are an assistant with tools. Do what the user asks by calling the tools; "
    "when nothing needs doing, answer without calling any."
)
# A run's BFCL server is started for the agent's first request: allow for its start-up
# (docs/agents.md, per-run servers) rather than openai-agents' 5 s default.
SESSION_TIMEOUT_S = 60.0


async def play(
    tracecard: TracecardClient, run_id: str, mcp_url: str, model: Model, max_steps: int = 20
) -> tuple[list[int], str]:
    """Every user turn of the run through the agent; the turn indexes handed out and the last
    answer."""
    handed: list[int] = []
    answer = ""
    async with MCPServerStreamableHttp(
        params={"url": mcp_url, "timeout": SESSION_TIMEOUT_S},
        name="bfcl",
        # listed again at every run: a server may change its tools between turns (BFCL's
        # multi_turn_miss_func reveals a function at a later turn, docs/benchmarks/bfcl.md)
        cache_tools_list=False,
        client_session_timeout_seconds=SESSION_TIMEOUT_S,
    ) as server:
        agent = Agent(name="bfcl", instructions=INSTRUCTIONS, model=model, mcp_servers=[server])
        history: list[Any] = []
        while True:
            turn = await asyncio.to_thread(tracecard.next_turn, run_id)
            if turn["done"]:
                return handed, answer
            handed.append(turn["index"])
            conversation = [*history, {"role": "user", "content": turn["user"]}]
            result = await Runner.run(agent, conversation, max_turns=max_steps)
            history = result.to_input_list()
            answer = str(result.final_output)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the model name the endpoint serves")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    args = parser.parse_args()
    env = os.environ
    client = AsyncOpenAI(base_url=args.base_url, api_key=env.get("OPENAI_API_KEY", "unused"))
    model = OpenAIChatCompletionsModel(model=args.model, openai_client=client)
    with TracecardClient(env["TRACECARD_URL"], token=env.get("TRACECARD_API_TOKEN")) as tracecard:
        _handed, answer = asyncio.run(
            play(tracecard, env["TRACECARD_RUN_ID"], env["TRACECARD_UPSTREAM_BFCL"], model)
        )
    answer_file = env.get("TRACECARD_ANSWER_FILE")
    if answer_file:
        with open(answer_file, "w", encoding="utf-8") as handle:
            handle.write(answer)
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
