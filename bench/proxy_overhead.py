"""Proxy overhead: `tools/call` on a trivial tool, direct and through a recording tracecard.

Starts the SDK test server (tests/servers/tool_server.py) twice -- stateless+JSON (the 2026-07-28
protocol, the hot loop) and sessions+SSE (2025-11-25) -- and a real `tracecard serve` subprocess
on SQLite with recording on, then drives both paths alternately from one process with a lean raw
JSON-RPC client on aiohttp:

- sequential: p50 / p99 latency over N calls (direct and proxied interleaved in blocks)
- concurrent: C clients calling for D seconds, calls per second (rounds alternate), and the
  tracecard process's CPU time per proxied call (from /proc: it barely moves with the load
  that other processes put on the machine, unlike latency and calls/s)

A bare aiohttp pass-through that records nothing (`bench/bare_hop.py`, named `hop`) runs in the
same rounds, so every tracecard's CPU per call is also given as a multiple of that hop's
(`*_cpu_vs_hop`, and `*_cpu_vs_hop_median` of each round's own ratio, steadier on a machine
whose speed drifts; issue #24's target is at most 1.0).

`--compare PATH` (repeatable) also starts a tracecard from another checkout (e.g. a
`git worktree` of an earlier commit), named after its folder, and alternates it with the
others, so an A/B sees the same machine state.

`--pin` puts every server measured (each tracecard and each hop, all their threads) on the last
CPU and this process with the upstream test servers on the others, so the client's and the
upstream's work does not share a core with the servers whose CPU is read.

Run:  .venv/bin/python bench/proxy_overhead.py [--calls 2000] [--clients 32] [--seconds 5]
      [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import free_port, mcp_tool_server, spawn  # noqa: E402

# a span is committed at most `batch_delay_ms` (0.2 s) + `store_every_ms` (1 s) after its call:
# each measurement waits this long after its calls, so their storing is counted with them
SETTLE_S = 1.5
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Caller:
    """A lean JSON-RPC client: one aiohttp session, one prepared request per protocol."""

    def __init__(self, http: aiohttp.ClientSession, url: str, modern: bool) -> None:
        self.http = http
        self.url = url
        self.modern = modern
        self.session_id: str | None = None
        self.next_id = 0
        self.headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }

    async def open(self) -> None:
        """The legacy handshake (sessions); nothing to do for the stateless protocol."""
        if self.modern:
            self.headers.update(
                {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
            )
            return
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        async with self.http.post(self.url, json=init, headers=self.headers) as response:
            self.session_id = response.headers["mcp-session-id"]
            await response.read()
        self.headers.update({"mcp-session-id": self.session_id, "mcp-protocol-version": LEGACY})
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with self.http.post(self.url, json=note, headers=self.headers) as response:
            await response.read()

    async def call(self) -> float:
        """One `tools/call echo`; returns its latency in seconds."""
        self.next_id += 1
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
        if self.modern:
            params["_meta"] = ENVELOPE
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}
        ).encode()
        start = time.perf_counter()
        async with self.http.post(self.url, data=body, headers=self.headers) as response:
            payload = await response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200 or b'"hi"' not in payload:
            raise RuntimeError(f"bad answer {response.status}: {payload[:200]!r}")
        return elapsed

    async def close(self) -> None:
        if self.session_id:
            async with self.http.delete(self.url, headers=self.headers) as response:
                await response.read()


async def sequential(callers: dict[str, Caller], calls: int) -> dict[str, Any]:
    """Interleave blocks of calls so every path sees the same machine state."""
    times: dict[str, list[float]] = {name: [] for name in callers}
    for _ in range(20):  # warm-up: connections, caches, lazy imports
        for caller in callers.values():
            await caller.call()
    block = 50
    for _ in range(max(1, calls // block)):
        for name, caller in callers.items():
            for _ in range(block):
                times[name].append(await caller.call())
    summary: dict[str, Any] = {}
    for name, samples in times.items():
        ordered = sorted(samples)
        summary[name] = {
            "calls": len(samples),
            "p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
        }
    direct = summary["direct"]
    for name in callers:
        if name != "direct":
            summary[name]["added_p50_ms"] = round(summary[name]["p50_ms"] - direct["p50_ms"], 3)
            summary[name]["added_p99_ms"] = round(summary[name]["p99_ms"] - direct["p99_ms"], 3)
        if name not in ("direct", "hop") and "hop" in summary:
            hop = summary["hop"]["added_p50_ms"]
            summary[name]["added_p50_vs_hop"] = round(summary[name]["added_p50_ms"] / hop, 3)
    return summary


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` on `cpus` (threads it starts later inherit it)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), cpus)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loop_cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process's main thread (its event loop), from /proc."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/task/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def throughput(
    http: aiohttp.ClientSession,
    url: str,
    modern: bool,
    clients: int,
    seconds: float,
    pid: int | None = None,
) -> tuple[float, int, float, float, float]:
    """Calls per second from `clients` concurrent callers over `seconds`, the calls made, and
    the CPU seconds of process `pid` during the calls and during the sessions' opening and
    closing (sessions + SSE: `initialize`, `notifications/initialized`, `DELETE` per caller)."""
    callers = [Caller(http, url, modern) for _ in range(clients)]
    setup = cpu_seconds(pid)
    await asyncio.gather(*(c.open() for c in callers))
    await asyncio.sleep(SETTLE_S)  # what the opens left to the exporter lands before the clock
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop(caller: Caller) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await caller.call()
            done += 1

    before = cpu_seconds(pid)
    loop_before = loop_cpu_seconds(pid)
    start = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in callers))
    rate = done / (time.perf_counter() - start)
    loop_cpu = loop_cpu_seconds(pid) - loop_before
    await asyncio.sleep(SETTLE_S)  # the last of these calls' spans is stored
    calls_cpu = cpu_seconds(pid) - before
    closing = cpu_seconds(pid)
    await asyncio.gather(*(c.close() for c in callers))
    await asyncio.sleep(SETTLE_S)
    setup_cpu = before - setup + cpu_seconds(pid) - closing
    return rate, done, calls_cpu, setup_cpu, loop_cpu


async def measure(
    urls: dict[str, str], pids: dict[str, int | None], modern: bool, args: argparse.Namespace
) -> dict[str, Any]:
    """Sequential latency, then alternating concurrent rounds, for every URL in `urls`."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        callers = {name: Caller(http, url, modern) for name, url in urls.items()}
        for caller in callers.values():
            await caller.open()
        result = await sequential(callers, args.calls)
        for caller in callers.values():
            await caller.close()
        rates: dict[str, list[float]] = {name: [] for name in urls}
        cpu: dict[str, list[float]] = {name: [] for name in urls}
        setups: dict[str, list[float]] = {name: [] for name in urls}
        loops: dict[str, list[float]] = {name: [] for name in urls}
        for _ in range(args.rounds):
            for name, url in urls.items():
                pid = pids.get(name)
                rate, done, calls_cpu, setup_cpu, loop_cpu = await throughput(
                    http, url, modern, args.clients, args.seconds, pid
                )
                rates[name].append(rate)
                cpu[name].append(calls_cpu / done * 1000)
                loops[name].append(loop_cpu / done * 1000)
                setups[name].append(setup_cpu / args.clients * 1000)
    concurrent: dict[str, Any] = {
        "clients": args.clients,
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
    }
    direct_rate = statistics.mean(rates["direct"])
    for name in urls:
        concurrent[f"{name}_calls_per_s"] = round(statistics.mean(rates[name]), 1)
        if name != "direct":
            concurrent[f"{name}_ratio"] = round(statistics.mean(rates[name]) / direct_rate, 3)
            concurrent[f"{name}_cpu_ms_per_call"] = round(statistics.mean(cpu[name]), 3)
            concurrent[f"{name}_cpu_ms_per_call_rounds"] = [round(c, 3) for c in cpu[name]]
            # the event loop's thread alone (the exporter's and the spool's threads left out)
            concurrent[f"{name}_loop_cpu_ms_per_call"] = round(statistics.mean(loops[name]), 3)
            if not modern:  # a session's initialize, initialized and DELETE, outside the calls
                per_session = round(statistics.mean(setups[name]), 3)
                concurrent[f"{name}_cpu_ms_per_session_open_close"] = per_session
    if "hop" in urls:  # the figure: CPU per recorded call vs the bare hop's
        hop_cpu = statistics.mean(cpu["hop"])
        hop_rate = statistics.mean(rates["hop"])
        for name in urls:
            if name not in ("direct", "hop"):
                mean_cpu, mean_rate = statistics.mean(cpu[name]), statistics.mean(rates[name])
                concurrent[f"{name}_cpu_vs_hop"] = round(mean_cpu / hop_cpu, 3)
                concurrent[f"{name}_rate_vs_hop"] = round(mean_rate / hop_rate, 3)
                # each round's own ratio (the paths of a round run back to back, so a machine
                # whose speed drifts between rounds moves both sides of it), and their median
                per_round = [c / h for c, h in zip(cpu[name], cpu["hop"], strict=True)]
                concurrent[f"{name}_cpu_vs_hop_rounds"] = [round(r, 3) for r in per_round]
                concurrent[f"{name}_cpu_vs_hop_median"] = round(statistics.median(per_round), 3)
    result["concurrent"] = concurrent
    return result


def serve_command(root: Path, config: Path, port: int, db: str) -> list[str]:
    """`tracecard serve` run from the checkout at `root` (its `server` package comes first)."""
    start = f"import sys, runpy; sys.path.insert(0, {str(root)!r}); "
    start += "runpy.run_module('tracecard.server.cli', run_name='__main__')"
    return [
        sys.executable,
        "-c",
        start,
        "serve",
        "--config",
        str(config),
        "--port",
        str(port),
        "--db",
        db,
    ]


def machine() -> dict[str, Any]:
    model = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per path")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per concurrent round")
    parser.add_argument("--rounds", type=int, default=2, help="concurrent rounds per path")
    parser.add_argument("--modes", default="stateless,session", help="which server modes")
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], help="another checkout to run too"
    )
    parser.add_argument("--no-hop", action="store_true", help="leave out the bare aiohttp hop")
    parser.add_argument("--pin", action="store_true", help="measured servers on a CPU of their own")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "load_before": os.getloadavg(),
    }
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin:
        if len(cpus) < 2:
            raise SystemExit("--pin needs two CPUs or more")
        os.sched_setaffinity(0, set(cpus[:-1]))  # this process and the upstreams it starts
        report["pinned"] = {"servers": cpus[-1:], "client_and_upstreams": cpus[:-1]}
    with (
        tempfile.TemporaryDirectory() as folder,
        mcp_tool_server("--stateless", "--json") as json_url,
        mcp_tool_server() as session_url,
        contextlib.ExitStack() as servers,
    ):
        config = Path(folder) / "tracecard.toml"
        config.write_text(
            f'[upstreams.json]\nurl = "{json_url}"\n[upstreams.session]\nurl = "{session_url}"\n'
        )
        bases: dict[str, str] = {}
        pids: dict[str, int | None] = {"direct": None}
        roots = {"proxy": ROOT, **{path.resolve().name: path.resolve() for path in args.compare}}
        for name, root in roots.items():
            port = free_port()
            command = serve_command(root, config, port, f"sqlite:///{folder}/{name}.db")
            pids[name] = servers.enter_context(spawn(command, port)).pid
            bases[name] = f"http://127.0.0.1:{port}"
            if args.pin:
                pin(pids[name], set(cpus[-1:]))
        hops: dict[str, str] = {}
        for mode, url in (("stateless", json_url), ("session", session_url)):
            if mode in args.modes.split(",") and not args.no_hop:
                port = free_port()
                command = [sys.executable, str(ROOT / "bench" / "bare_hop.py")]
                command += ["--port", str(port), "--upstream", url]
                pids[f"hop:{mode}"] = servers.enter_context(spawn(command, port)).pid
                hops[mode] = f"http://127.0.0.1:{port}/mcp"
                if args.pin:
                    pin(pids[f"hop:{mode}"], set(cpus[-1:]))
        for mode in args.modes.split(","):
            modern = mode == "stateless"
            upstream = "json" if modern else "session"
            urls = {"direct": json_url if modern else session_url}
            if mode in hops:
                urls["hop"] = hops[mode]
                pids["hop"] = pids[f"hop:{mode}"]
            urls.update({name: f"{base}/mcp/{upstream}" for name, base in bases.items()})
            report[mode] = asyncio.run(measure(urls, pids, modern, args))
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
