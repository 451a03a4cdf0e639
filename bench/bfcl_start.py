"""Per-run start latency of the BFCL server: cold (an interpreter importing everything), forked
from the pre-forked parent (server/bfcl/prefork.py, through the relay), and warm (a relay
spawned ahead, as the warm pool holds it, then handshaken).

    .venv/bin/python bench/bfcl_start.py [--runs 20] [--entry multi_turn_base_0]

Each start is timed from the spawn (warm: from the moment a run would take it) to the answer of
`initialize`, then `tools/list` is asked and stdin closed. CPU is user + system of everything
started, read from getrusage(RUSAGE_CHILDREN) around each mode (the forked servers are the
parent's children: their CPU reaches us when the parent is stopped and waited for; the
parent's own import is reported apart). Prints JSON; bounded by --runs and a 120 s timeout per
answer.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PY = sys.executable
HELLO = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _line(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    return dict(json.loads(proc.stdout.readline()))


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PY, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        start_new_session=True,
    )


def _serve(proc: subprocess.Popen[bytes], started: float) -> float:
    """Handshake, one tools/list, stdin closed; the ms from `started` to initialize's answer."""
    answer = _line(proc, HELLO)
    took = (time.perf_counter() - started) * 1000
    assert "result" in answer, answer
    assert proc.stdin is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    tools = _line(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert tools["result"]["tools"], tools
    proc.stdin.close()
    proc.wait(120)
    return took


def _summary(values: list[float], cpu: float) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "cpu_ms_per_start": round(cpu * 1000 / len(values), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--entry", default="multi_turn_base_0")
    args = parser.parse_args()
    category = args.entry.rsplit("_", 1)[0]
    relay = ["-m", "tracecard.server.bfcl.relay", args.entry]
    result: dict[str, Any] = {"entry": args.entry, "load_before": os.getloadavg()}

    cpu, times = _cpu(), []
    for _ in range(args.runs):
        started = time.perf_counter()
        times.append(
            _serve(_spawn(["-m", "tracecard.server.bfcl.mcp_server", args.entry], {}), started)
        )
    result["cold"] = _summary(times, _cpu() - cpu)

    folder = tempfile.mkdtemp(prefix="tc-bench-")
    socket_path = str(Path(folder) / "p.sock")
    cpu, started = _cpu(), time.perf_counter()
    parent = subprocess.Popen(
        [PY, "-m", "tracecard.server.bfcl.prefork", socket_path, category],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert parent.stdout is not None and parent.stdout.readline().strip() == b"ready"
    ready_ms = (time.perf_counter() - started) * 1000
    stat = Path(f"/proc/{parent.pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    result["parent_once"] = {
        "ready_ms": round(ready_ms, 1),
        "cpu_ms": round((int(stat[11]) + int(stat[12])) * 1000 / ticks, 1),
    }
    env = {"TRACECARD_PRELOAD": socket_path}
    forked, warm = [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        forked.append(_serve(_spawn(relay, env), started))
    for _ in range(args.runs):
        proc = _spawn(relay, env)
        time.sleep(0.5)  # waiting in the pool, as a run's process is before the run needs it
        warm.append(_serve(proc, time.perf_counter()))
    parent.terminate()
    parent.wait(30)
    total = _cpu() - cpu - result["parent_once"]["cpu_ms"] / 1000
    # forked and warm starts are the same work (relay + fork + server); CPU is over both
    result["forked"] = _summary(forked, total / 2)
    result["warm"] = _summary(warm, total / 2)
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
