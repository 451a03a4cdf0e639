"""Model proxy overhead: chat completions direct vs through a recording tracecard (`/llm/...`).

Starts the scripted OpenAI-compatible upstream (tests/servers/model_upstream.py, answers built
from the `openai` SDK's types) and a real `tracecard serve` subprocess (SQLite, recording on,
every request stored as a `chat` span), then sends the same request alternately to both from one
process with a lean aiohttp client, in interleaved blocks:

- non-streamed (`script-tools`: two tool calls in a JSON body): total latency p50 / p99
- streamed (`script-tools`, `stream: true`, usage chunk: 12 SSE events): time to the first body
  chunk (first token) and total latency, p50 / p99
- the tracecard process's CPU time per proxied request (from /proc)

Run:  .venv/bin/python bench/llm_overhead.py [--requests 1000] [--block 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.proxy_overhead import cpu_seconds, machine, serve_command  # noqa: E402
from tests.servers.model_upstream import TOOLS  # noqa: E402
from tests.support.processes import free_port, spawn  # noqa: E402

MESSAGES = [{"role": "user", "content": "What is 2 + 40? Use the add tool."}]
BODIES = {
    "json": {"model": "script-tools", "messages": MESSAGES, "tools": TOOLS},
    "stream": {
        "model": "script-tools",
        "messages": MESSAGES,
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
}


async def one(http: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, float]:
    """(time to the first body chunk, total) in milliseconds for one request."""
    start = time.perf_counter()
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    async with http.post(url, data=body, headers=headers) as response:
        first = await response.content.readany()
        ttfb = time.perf_counter() - start
        assert response.status == 200 and first, response.status
        async for _chunk in response.content.iter_any():
            pass
    return ttfb * 1000, (time.perf_counter() - start) * 1000


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
    }


async def measure(urls: dict[str, str], pid: int, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for mode, document in BODIES.items():
            body = json.dumps(document).encode()
            for url in urls.values():  # warm up both paths (connections, caches)
                for _ in range(20):
                    await one(http, f"{url}/chat/completions", body)
            samples: dict[str, dict[str, list[float]]] = {
                name: {"first": [], "total": []} for name in urls
            }
            cpu = 0.0
            done = 0
            while done < args.requests:
                for name, url in urls.items():
                    before = cpu_seconds(pid) if name == "tracecard" else 0.0
                    for _ in range(args.block):
                        first, total = await one(http, f"{url}/chat/completions", body)
                        samples[name]["first"].append(first)
                        samples[name]["total"].append(total)
                    if name == "tracecard":
                        cpu += cpu_seconds(pid) - before
                done += args.block
            row: dict[str, Any] = {}
            for name, found in samples.items():
                row[name] = {
                    "first": percentiles(found["first"]),
                    "total": percentiles(found["total"]),
                }
            for part in ("first", "total"):
                for stat in ("p50", "p99"):
                    added = row["tracecard"][part][stat] - row["direct"][part][stat]
                    row[f"added_{part}_{stat}_ms"] = round(added, 3)
            row["tracecard_cpu_ms_per_request"] = round(cpu / done * 1000, 3)
            results[mode] = row
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per path and mode")
    parser.add_argument("--block", type=int, default=50, help="requests per interleaved block")
    args = parser.parse_args()
    model_port, port = free_port(), free_port()
    model_command = [sys.executable, "-m", "tests.servers.model_upstream", str(model_port)]
    with tempfile.TemporaryDirectory() as folder, spawn(model_command, model_port):
        config = Path(folder) / "tracecard.toml"
        config.write_text(
            f'[upstreams.openai]\nurl = "http://127.0.0.1:{model_port}/v1"\nkind = "openai"\n'
        )
        command = serve_command(ROOT, config, port, f"sqlite:///{folder}/bench.db")
        with spawn(command, port) as tracecard:
            urls = {
                "direct": f"http://127.0.0.1:{model_port}/v1",
                "tracecard": f"http://127.0.0.1:{port}/llm/openai",
            }
            started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            results = asyncio.run(measure(urls, tracecard.pid, args))
    print(json.dumps({"machine": machine(), "started": started, "results": results}, indent=2))


if __name__ == "__main__":
    main()
