"""Replay a BFCL entry's ground truth (or a perturbed version of it) through a tracecard run,
turn by turn: no model, so the whole path (turns, proxy, BFCL server, probes, scorers) is tested.

As a `tracecard run` agent (it reads the environment contract of docs/agents.md):

    tracecard run --suite bfcl.toml --config replay --trials 3 \\
        --agent 'python examples/agents/bfcl_replay.py'
    tracecard run ... --agent 'python examples/agents/bfcl_replay.py --perturb late --seed 1'

It asks tracecard for each user turn (`POST /api/runs/{id}/turns/next`), makes that turn's calls
through the run's proxy URL of the `bfcl` upstream, and writes "done" as its final answer.
To test your own model instead, replace `replay()` with your agent (see docs/benchmarks/bfcl.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tracecard.client import TracecardClient
from tracecard.server.bfcl.trajectories import PERTURBATIONS, ground_truth, perturb


async def replay(
    tracecard: TracecardClient,
    run_id: str,
    entry_id: str,
    mcp_url: str,
    perturbation: str | None = None,
    seed: int = 0,
) -> list[int]:
    """Play the entry's trajectory through the run; the turn indexes handed out."""
    trajectory: Any = ground_truth(entry_id)
    if perturbation is not None:
        trajectory = perturb(entry_id, trajectory, perturbation, seed) or trajectory
    handed: list[int] = []
    async with httpx2.AsyncClient(timeout=60) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http)) as mcp:
            while True:
                turn = await asyncio.to_thread(tracecard.next_turn, run_id)
                if turn["done"]:
                    return handed
                handed.append(turn["index"])
                calls = trajectory[turn["index"]] if turn["index"] < len(trajectory) else []
                for call in calls:
                    await mcp.call_tool(call["tool"], call["arguments"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--perturb", choices=PERTURBATIONS, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env = os.environ
    with TracecardClient(env["TRACECARD_URL"], token=env.get("TRACECARD_API_TOKEN")) as client:
        asyncio.run(
            replay(
                client,
                env["TRACECARD_RUN_ID"],
                env["TRACECARD_TASK_ID"],
                env["TRACECARD_UPSTREAM_BFCL"],
                args.perturb,
                args.seed,
            )
        )
    answer_file = env.get("TRACECARD_ANSWER_FILE")
    if answer_file:
        with open(answer_file, "w", encoding="utf-8") as handle:
            handle.write("done")
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
