"""Stdio bridge overhead: the same tool calls to `mcp-server-time`, direct over stdio vs through
tracecard (HTTP to the proxy, the bridge, the server's stdio), in both protocol generations.

Run: .venv/bin/python bench/stdio_overhead.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import free_port, stop, wait_for_port  # noqa: E402

TIME_SERVER = str(ROOT / ".venv" / "bin" / "mcp-server-time")


async def measure(target: object, mode: str, calls: int) -> list[float]:
    async with Client(target, mode=mode) as client:  # type: ignore[arg-type]
        for _ in range(20):  # warm up
            await client.call_tool("get_current_time", {"timezone": "UTC"})
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool("get_current_time", {"timezone": "UTC"})
            latencies.append(time.perf_counter() - started)
    return latencies


def report(label: str, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p95 = ordered[int(len(ordered) * 0.95)] * 1000
    rate = len(ordered) / sum(ordered)
    print(f"{label:<34} p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   {rate:7.0f} calls/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tc-stdio-bench-"))
    config = tmp / "tracecard.toml"
    config.write_text(f'[upstreams.time]\ncommand = ["{TIME_SERVER}", "--local-timezone", "UTC"]\n')
    port = free_port()
    server = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/tracecard"),
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--db",
            f"sqlite:///{tmp / 'tracecard.db'}",
        ],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc=server)
        url = f"http://127.0.0.1:{port}/mcp/time"
        direct = StdioServerParameters(command=TIME_SERVER, args=["--local-timezone", "UTC"])
        results = {
            "direct stdio (legacy)": asyncio.run(measure(direct, "legacy", args.calls)),
            "through tracecard, legacy session": asyncio.run(measure(url, "legacy", args.calls)),
            "through tracecard, stateless": asyncio.run(measure(url, "auto", args.calls)),
        }
    finally:
        stop(server)
    for label, latencies in results.items():
        report(label, latencies)
    base = statistics.median(results["direct stdio (legacy)"])
    for label in list(results)[1:]:
        added = (statistics.median(results[label]) - base) * 1000
        print(f"added p50 latency, {label}: {added:+.2f} ms")


if __name__ == "__main__":
    main()
