"""Instructions per recorded `tools/call`, served, tracecard against the bare aiohttp hop: the
one figure of #24 item 2 that the machine's speed does not move.

`bench/proxy_overhead.py` reads CPU time, which on the 2-core VMs moved by 0.67-1.63x between
rounds of the same code. Here each server runs under valgrind's callgrind (every thread, the
store's and the spool's included) and its counters are dumped around the calls with
`callgrind_control`, so a figure counts those calls' instructions and nothing else: the start,
the warm-up and the sessions' opening and closing are dumped apart. Two stateless runs of one
build agree within 0.2 %; with sessions within ~3 % (how many reads an SSE answer takes depends
on timing). A build against another, or against the hop, is a comparison of work done. Compare
runs of the same `--calls` only: what is done per batch of spans and per round (the storing
threads' transactions, the sessions' shared flushes) is spread over the calls counted.

Instructions are not CPU time: a regex or a memcpy retires several instructions a cycle, a
cache miss or a syscall retires few (the kernel's side of a syscall is not counted at all). So
this is the check for a change on the path, beside the CPU figure of `proxy_overhead.py`, not
instead of it.

Per server and mode: the SDK test server upstream (stateless + JSON or sessions + SSE, as in
`proxy_overhead.py`), 32 clients, a warm-up of 200 calls, then `--calls` calls; with sessions,
the 32 sessions' opens (`initialize` and `initialized`) and closes (`DELETE`, which ends each
one's ad-hoc run) are counted apart, per session. `--libraries` adds where a call's
instructions go, by shared object (self cost: libpython is the interpreter, the rest C).

Needs valgrind (`apt-get install valgrind`). Under valgrind a server runs ~50x slower: one
server and mode takes 1-3 minutes (tracecard's start under valgrind is most of it).

Run:  .venv/bin/python bench/proxy_instructions.py [--modes stateless,session] [--calls 1000]
      [--compare PATH] [--libraries] [--keep DIR]

`--keep DIR` copies the counter files to `DIR/<mode>/`: `<server>.cg.<pid>.<part>-<thread>`,
part 3 the counted calls, thread 01 the event loop's (`callgrind_annotate FILE` reads one).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from proxy_overhead import Caller, machine, serve_command  # noqa: E402

from tests.support.processes import free_port, mcp_tool_server, wait_for_port  # noqa: E402

CLIENTS = 32
WARM_CALLS = 200
# under valgrind the store commits a second after a batch and works ~50x slower: what the
# counted calls leave to the exporter and the store lands before the next dump
SETTLE_S = 8.0
START_S = 600.0  # tracecard's imports under valgrind take a minute or more


def _dump(pid: int, label: str) -> None:
    """Write the counters so far to a file of their own, and start again from zero."""
    subprocess.run(["callgrind_control", "-d", label, str(pid)], check=True, capture_output=True)


async def _drive(url: str, modern: bool, pid: int, calls: int) -> None:
    """Warm up, then dump around: the sessions' opens, the calls, the sessions' closes."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def run(callers: list[Caller], count: int) -> None:
            left = count

            async def client(caller: Caller) -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    await caller.call()

            await asyncio.gather(*(client(c) for c in callers))

        warm = [Caller(http, url, modern) for _ in range(CLIENTS)]
        await asyncio.gather(*(c.open() for c in warm))
        await run(warm, WARM_CALLS)
        await asyncio.gather(*(c.close() for c in warm))
        await asyncio.sleep(SETTLE_S)
        _dump(pid, "warm")  # part 1: the start and the warm-up
        callers = [Caller(http, url, modern) for _ in range(CLIENTS)]
        await asyncio.gather(*(c.open() for c in callers))
        await asyncio.sleep(SETTLE_S)
        _dump(pid, "open")  # part 2
        await run(callers, calls)
        await asyncio.sleep(SETTLE_S)
        _dump(pid, "calls")  # part 3
        await asyncio.gather(*(c.close() for c in callers))
        await asyncio.sleep(SETTLE_S)
        _dump(pid, "close")  # part 4


def _total(path: Path) -> int:
    """The instructions a callgrind dump holds (its `summary:` or `totals:` line)."""
    with open(path, errors="replace") as dump:
        for line in dump:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def _by_object(path: Path) -> collections.Counter[str]:
    """Self cost (instructions) by shared object, from a callgrind dump: the cost lines of each
    function, leaving out the inclusive line that follows every `calls=`."""
    names: dict[str, str] = {}
    costs: collections.Counter[str] = collections.Counter()
    current = "?"
    skip = False
    with open(path, errors="replace") as dump:
        for line in dump:
            head = line[:1]
            if head.isdigit() or head in "+-*":
                if skip:
                    skip = False
                elif len(parts := line.split()) >= 2:
                    costs[current] += int(parts[1])
                continue
            key, _, value = line.rstrip("\n").partition("=")
            if key == "ob":
                found = re.match(r"\((\d+)\)(?:\s+(.*))?", value)
                if found is None:
                    current = value
                else:
                    if found.group(2) is not None:
                        names[found.group(1)] = found.group(2)
                    current = names.get(found.group(1), "?")
            elif key == "cob":
                found = re.match(r"\((\d+)\)\s+(.*)", value)
                if found is not None:
                    names[found.group(1)] = found.group(2)
            elif key == "calls":
                skip = True
    return collections.Counter({Path(k).name: v for k, v in costs.items()})


def measure(
    command: list[str],
    port: int,
    url: str,
    modern: bool,
    args: argparse.Namespace,
    folder: Path,
    name: str,
) -> dict[str, Any]:
    """One server under callgrind: its instructions a call (and a session's open and close)."""
    out = folder / f"{name}.cg"
    valgrind = ["valgrind", "--tool=callgrind", "--separate-threads=yes"]
    valgrind += [f"--callgrind-out-file={out}.%p"]
    with open(folder / f"{name}.log", "wb") as log:
        proc = subprocess.Popen(valgrind + command, stdout=log, stderr=log, cwd=ROOT)
    try:
        wait_for_port(port, START_S, proc)
        asyncio.run(_drive(url, modern, proc.pid, args.calls))
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(120)
        if proc.poll() is None:
            proc.kill()
    # one file per thread and part: `<out>.<pid>.<part>-<thread>`, thread 01 the event loop's
    part = {n: sorted(folder.glob(f"{out.name}.{proc.pid}.{n}-*")) for n in (2, 3, 4)}
    calls = [_total(path) for path in part[3]]
    found: dict[str, Any] = {
        "per_call": round(sum(calls) / args.calls),
        "per_call_loop_thread": round(calls[0] / args.calls),
    }
    if not modern:
        opens_closes = [_total(path) for path in part[2] + part[4]]
        found["per_session_open_close"] = round(sum(opens_closes) / CLIENTS)
        loop = _total(part[2][0]) + _total(part[4][0])
        found["per_session_open_close_loop_thread"] = round(loop / CLIENTS)
    if args.libraries:
        objects: collections.Counter[str] = collections.Counter()
        for path in part[3]:
            objects.update(_by_object(path))
        found["per_call_by_object"] = {
            k: round(v / args.calls) for k, v in objects.most_common(12) if v >= args.calls * 50
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls counted per server")
    parser.add_argument("--modes", default="stateless,session", help="which upstream modes")
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], help="another checkout to run too"
    )
    parser.add_argument("--no-hop", action="store_true", help="leave out the bare aiohttp hop")
    parser.add_argument("--libraries", action="store_true", help="a call's work by object")
    parser.add_argument(
        "--keep", type=Path, default=None, help="copy the counter files here (callgrind_annotate)"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind: apt-get install valgrind")
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "calls": args.calls,
        "clients": CLIENTS,
    }
    roots = {"tracecard": ROOT, **{p.resolve().name: p.resolve() for p in args.compare}}
    for mode in args.modes.split(","):
        modern = mode == "stateless"
        flags = ("--stateless", "--json") if modern else ()
        results: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as temp, mcp_tool_server(*flags) as upstream:
            folder = Path(temp)
            if not args.no_hop:
                port = free_port()
                command = [sys.executable, str(ROOT / "bench" / "bare_hop.py")]
                command += ["--port", str(port), "--upstream", upstream]
                url = f"http://127.0.0.1:{port}/mcp"
                results["hop"] = measure(command, port, url, modern, args, folder, "hop")
            config = folder / "tracecard.toml"
            config.write_text(f'[upstreams.u]\nurl = "{upstream}"\n')
            for name, root in roots.items():
                port = free_port()
                command = serve_command(root, config, port, f"sqlite:///{folder}/{name}.db")
                url = f"http://127.0.0.1:{port}/mcp/u"
                results[name] = measure(command, port, url, modern, args, folder, name)
            if args.keep is not None:
                shutil.copytree(folder, args.keep / mode, dirs_exist_ok=True)
        if "hop" in results:
            hop = results["hop"]["per_call"]
            for name in roots:
                results[name]["per_call_vs_hop"] = round(results[name]["per_call"] / hop, 3)
        report[mode] = results
        print(json.dumps({mode: results}), file=sys.stderr, flush=True)  # progress
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
