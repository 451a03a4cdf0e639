"""Replay and fault plans on the hot path: a recorded answer vs a live pass-through.

Starts the SDK test server (tests/servers/tool_server.py, stateless + JSON) and a real
`tracecard serve` subprocess on SQLite, records a source run of `tools/call echo`, then calls
three runs of the same task from one process with a lean raw JSON-RPC client (aiohttp):

- live: a live experiment's run (forwarded to the tool server, recorded)
- replayed: a run of an experiment with `replay` from the source (answered from memory)
- faults (none fire): a run under a 3-rule fault plan whose rules match but never fire

and the same for model answers: Chat Completions through `/llm/` to the scripted upstream
(tests/servers/model_upstream.py, its own process), whole and streamed, live vs replayed
(`mode = "model"`) from a source run that recorded every request the replayed run makes.

Sequential p50 / p99 over N calls each (interleaved in blocks of 50), then the tracecard
process's CPU time per call (from /proc) over N more calls per path, one path at a time. Last,
in this process, the cost of one fault-rule check (`RunFaults.check`, 3 rules) and of one
replay lookup (`UpstreamIndex.take`).

Run:  .venv/bin/python bench/replay.py [--calls 2000] [--model-calls 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from proxy_overhead import Caller, cpu_seconds, machine, serve_command  # noqa: E402

from tests.support.processes import free_port, mcp_tool_server, spawn  # noqa: E402
from tracecard.server.faults.plan import FaultPlan, run_faults  # noqa: E402
from tracecard.server.replay.index import Recorded, UpstreamIndex  # noqa: E402
from tracecard.server.replay.keys import mcp_key  # noqa: E402
from tracecard.server.replay.plan import UpstreamReplay  # noqa: E402

SUITE = """
schema_version = 1
name = "replay-bench"
[[tasks]]
id = "echo"
instruction = "echo hi"
upstreams = ["json", "model"]
[tasks.completion]
checks = [{ contains = "hi" }]
"""
# three rules that match every echo call (the checks all run) and never fire
RULES = [
    {"kind": "tool_error", "upstream": "json", "tool": "ech*", "probability": 0.0},
    {"kind": "timeout", "upstream": "js*", "nth": 1_000_000},
    {"kind": "latency_ms", "upstream": "*", "tool": "echo", "ms": 1, "after_ms": 86_400_000},
]


def _experiment(base: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{base}/api/experiments", json=body, timeout=120)
    response.raise_for_status()
    run: dict[str, Any] = response.json()["runs"][0]
    return run


async def _calls(caller: Caller, count: int) -> list[float]:
    return [await caller.call() for _ in range(count)]


class ModelCaller:
    """One Chat Completions request, whole or streamed, read to its end; returns seconds."""

    def __init__(self, http: aiohttp.ClientSession, url: str, stream: bool) -> None:
        self.http, self.url = http, f"{url}/chat/completions"
        message = [{"role": "user", "content": "hi"}]
        body = {"model": "script-text", "messages": message, "stream": stream}
        self.body = json.dumps(body).encode()
        self.headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}

    async def open(self) -> None:
        return None

    async def call(self) -> float:
        start = time.perf_counter()
        async with self.http.post(self.url, data=self.body, headers=self.headers) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"model call answered {response.status}")
        return time.perf_counter() - start


async def _timed(
    callers: dict[str, Any], calls: int, pid: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Latencies in interleaved blocks of 50, then tracecard's CPU per call, path by path."""
    for caller in callers.values():
        await caller.open()
        await _calls(caller, 20)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in callers}
    for _ in range(max(1, calls // 50)):
        for name, caller in callers.items():
            times[name].extend(await _calls(caller, 50))
    cpu: dict[str, float] = {}
    for name, caller in callers.items():
        before = cpu_seconds(pid)
        await _calls(caller, calls)
        cpu[name] = (cpu_seconds(pid) - before) / calls * 1000
    return times, cpu


def _summary(times: dict[str, list[float]], cpu: dict[str, float], live: str) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, samples in times.items():
        ordered = sorted(samples)
        summary[name] = {
            "calls": len(samples),
            "p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
            "cpu_ms_per_call": round(cpu[name], 3),
        }
    base = summary[live]
    for name, found in summary.items():  # every other path of this group, against its live one
        if name != live:
            found["added_p50_ms_vs_live"] = round(found["p50_ms"] - base["p50_ms"], 3)
            found["added_cpu_ms_vs_live"] = round(
                found["cpu_ms_per_call"] - base["cpu_ms_per_call"], 3
            )
    return summary


async def measure_model(base: str, pid: int, calls: int, config: dict[str, Any]) -> dict[str, Any]:
    """Model answers: live vs replayed, whole and streamed."""
    source = _experiment(base, config)
    async with aiohttp.ClientSession() as http:
        for stream in (False, True):  # every request the replayed run will make, recorded
            await _calls(ModelCaller(http, source["urls"]["model"], stream), 20 + 2 * calls + 100)
    httpx.post(f"{base}/api/runs/{source['id']}/finish", json={"final_answer": "hi"}, timeout=60)
    experiment = httpx.get(f"{base}/api/runs/{source['id']}", timeout=60).json()["experiment_id"]
    live = _experiment(base, config)["urls"]["model"]
    replay = {"source": experiment, "mode": "model"}
    replayed = _experiment(base, {**config, "replay": replay})["urls"]["model"]
    summary: dict[str, Any] = {}
    for stream, label in ((False, "whole"), (True, "streamed")):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            callers = {
                f"model {label} live": ModelCaller(http, live, stream),
                f"model {label} replayed": ModelCaller(http, replayed, stream),
            }
            times, cpu = await _timed(callers, calls, pid)
        summary |= _summary(times, cpu, f"model {label} live")
    return summary


async def measure(base: str, pid: int, calls: int, model_calls: int) -> dict[str, Any]:
    suite = httpx.post(
        f"{base}/api/suites",
        content=SUITE,
        headers={"content-type": "application/toml"},
        timeout=60,
    ).json()["version"]
    config = {"suite": suite, "config": {"name": "bench"}, "trials": 1}
    source = _experiment(base, config)
    async with aiohttp.ClientSession() as http:
        recorder = Caller(http, source["urls"]["json"], modern=True)
        await recorder.open()
        await _calls(recorder, 20 + 2 * calls + 100)  # every call the replayed run will make
    finish = {"final_answer": "hi"}
    httpx.post(f"{base}/api/runs/{source['id']}/finish", json=finish, timeout=60)
    experiment = httpx.get(f"{base}/api/runs/{source['id']}", timeout=60).json()["experiment_id"]
    runs = {
        "live": _experiment(base, config),
        "replayed": _experiment(base, {**config, "replay": {"source": experiment}}),
        "faults (none fire)": _experiment(base, {**config, "faults": {"seed": 7, "rules": RULES}}),
    }
    # a fresh pool: uvicorn closes connections idle for 5 s, and creating experiments takes time
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        callers = {
            name: Caller(http, run["urls"]["json"], modern=True) for name, run in runs.items()
        }
        times, cpu = await _timed(callers, calls, pid)
    summary = _summary(times, cpu, "live")
    if model_calls:
        summary |= await measure_model(base, pid, model_calls, config)
    return summary


def in_process() -> dict[str, float]:
    """Microseconds per fault-rule check (3 rules) and per replay lookup (4,000 recordings)."""
    faults = run_faults(FaultPlan.model_validate({"seed": 7, "rules": RULES}), "echo", 0)
    number = 200_000
    # CPU time (process_time), not wall time: the figure is the cost, whatever else runs
    timer = time.process_time
    check = (
        timeit.timeit(lambda: faults.check("json", "echo"), timer=timer, number=number)
        / number
        * 1e6
    )
    key = mcp_key("agent", "tools/call", "echo", {"arguments": {"text": "hi"}}, [])
    index = UpstreamIndex(UpstreamReplay(), [Recorded(key, f"{i:016x}") for i in range(number)])
    take = timeit.timeit(lambda: index.take(key), timer=timer, number=number) / number * 1e6
    empty = timeit.timeit(lambda: None, timer=timer, number=number) / number * 1e6
    return {
        "fault_check_us": round(check, 3),
        "replay_take_us": round(take, 3),
        "empty_call_us": round(empty, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per path and phase")
    parser.add_argument(
        "--model-calls", type=int, default=1000, help="model calls per path and phase (0: none)"
    )
    args = parser.parse_args()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "load_before": os.getloadavg(),
        "in_process": in_process(),
    }
    model_port = free_port()
    model_command = [sys.executable, "-m", "tests.servers.model_upstream", str(model_port)]
    with (
        tempfile.TemporaryDirectory() as folder,
        mcp_tool_server("--stateless", "--json") as url,
        spawn(model_command, model_port),
    ):
        config = Path(folder) / "tracecard.toml"
        model = f"http://127.0.0.1:{model_port}/v1"
        config.write_text(
            f'[upstreams.json]\nurl = "{url}"\n'
            f'[upstreams.model]\nurl = "{model}"\nkind = "openai"\n'
        )
        port = free_port()
        command = serve_command(ROOT, config, port, f"sqlite:///{folder}/bench.db")
        with spawn(command, port) as process:
            report["paths"] = asyncio.run(
                measure(f"http://127.0.0.1:{port}", process.pid, args.calls, args.model_calls)
            )
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
