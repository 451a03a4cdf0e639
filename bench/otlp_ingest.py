"""OTLP ingest throughput: spans/s committed to SQLite through `POST /v1/traces`, bytes per span.

Starts `tracecard serve` on a fresh SQLite file, posts pre-encoded protobuf requests (1,000
spans each, attributes like an LLM/agent span) from a few concurrent clients, and counts a span
only when its request has been answered (which happens after commit). Also measures the codec
plus `Store.insert_spans` in-process, without HTTP.

Run: .venv/bin/python bench/otlp_ingest.py [--spans 200000] [--batch 1000] [--concurrency 4]
     [--rounds 1] [--compare PATH]  (another checkout's server in the same alternating rounds;
     the server's CPU per span comes from /proc, which the machine's load moves far less)
     .venv/bin/python bench/otlp_ingest.py --peak-mb 16.5   (the server's peak memory for one
     request of that size, protobuf and JSON; set TRACECARD_OTLP_MAX_SPANS to raise the cap)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import free_port, stop, wait_for_port  # noqa: E402
from tracecard.traces.otlp import encode_otlp_json, encode_protobuf  # noqa: E402
from tracecard.traces.otlp_ingest import decode_protobuf  # noqa: E402
from tracecard.traces.store import Store  # noqa: E402


def make_batch(
    run_id: str, trace_id: str, size: int, encoding: str = "protobuf", tiny: bool = False
) -> bytes:
    now = time.time_ns()
    spans = []
    for index in range(size):
        spans.append(
            {
                "trace_id": trace_id,
                "span_id": secrets.token_hex(8),
                "parent_span_id": secrets.token_hex(8),
                "name": "chat gpt-4o-mini",
                "kind": 3,
                "start_time_unix_nano": now + index * 1000,
                "end_time_unix_nano": now + index * 1000 + 500_000,
                "status": {"code": 0},
                "attributes": {
                    "tracecard.run.id": run_id,
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 812,
                    "gen_ai.usage.output_tokens": 64,
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                    "server.address": "api.openai.com",
                },
                "events": [],
                "scope": "agent",
            }
        )
        if tiny:  # the most spans per byte: the run joins by the request's header instead
            spans[-1]["attributes"] = {}
            spans[-1]["parent_span_id"] = None
    resource = {"service.name": "bench-agent", "service.version": "1.0"}
    if encoding == "json":
        for span in spans:
            span["resource"] = resource
        return encode_otlp_json(spans)
    return encode_protobuf(spans, resource)


def _rss_kib(pid: int, field: str) -> int:
    """`VmHWM` (peak) or `VmRSS` of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def peak(size_mb: float) -> None:
    """One request of `size_mb` per encoding, each to a fresh server: its peak memory."""
    for encoding, media, per_span, tiny in (
        ("protobuf", "application/x-protobuf", 376, False),
        ("protobuf", "application/x-protobuf", 70, True),
        ("json", "application/json", 830, False),
        ("json", "application/json", 205, True),
    ):
        tmp = Path(tempfile.mkdtemp(prefix="tc-otlp-peak-"))
        port = free_port()
        server = serve(ROOT, tmp, port, TRACECARD_MAX_BODY_BYTES=str(64 * 1024 * 1024))
        try:
            wait_for_port(port, proc=server)
            url = f"http://127.0.0.1:{port}"
            run = httpx.post(f"{url}/api/runs", json={"config": {"name": "bench"}}).json()
            count = int(size_mb * 1e6 / per_span)
            body = make_batch(run["id"], run["trace_id"], count, encoding, tiny)
            idle = _rss_kib(server.pid, "VmRSS")
            response = httpx.post(
                f"{url}/v1/traces",
                content=body,
                headers={"content-type": media, "tracecard-run": run["id"]},
                timeout=300,
            )
            high = _rss_kib(server.pid, "VmHWM")
            label = f"{encoding}{' (tiny spans)' if tiny else ''}"
            print(
                f"{label}: {len(body) / 1e6:.1f} MB, {count:,} spans -> {response.status_code};"
                f" server RSS idle {idle / 1024:.0f} MiB, peak {high / 1024:.0f} MiB"
            )
        finally:
            stop(server)


async def post_all(url: str, bodies: list[bytes], concurrency: int) -> float:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for body in bodies:
            queue.put_nowait(body)

        async def worker() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                response = await client.post(
                    f"{url}/v1/traces",
                    content=body,
                    headers={"content-type": "application/x-protobuf"},
                )
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started


def in_process(bodies: list[bytes], tmp: Path) -> float:
    store = Store(f"sqlite:///{tmp / 'direct.db'}")
    store.create_schema()
    started = time.perf_counter()
    for body in bodies:
        batch = decode_protobuf(body)
        for span in batch.spans:
            span["run_id"] = span["attributes"]["tracecard.run.id"]
        store.insert_spans(batch.spans)
    elapsed = time.perf_counter() - started
    store.dispose()
    return elapsed


def db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(root: Path, tmp: Path, port: int, **more_env: str) -> subprocess.Popen[bytes]:
    """`tracecard serve` from the checkout at `root` on a fresh SQLite file in `tmp`."""
    start = f"import sys, runpy; sys.path.insert(0, {str(root)!r}); "
    start += "runpy.run_module('tracecard.server.cli', run_name='__main__')"
    env = {**os.environ, "TRACECARD_SANDBOX_ROOT": str(tmp / "sb"), **more_env}
    command = [sys.executable, "-c", start, "serve", "--port", str(port)]
    return subprocess.Popen(
        [*command, "--db", f"sqlite:///{tmp / 'tracecard.db'}"],
        cwd=tmp,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1, help="rounds per server, alternating")
    parser.add_argument("--peak-mb", type=float, default=None)
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], help="another checkout to run too"
    )
    args = parser.parse_args()
    if args.peak_mb is not None:
        peak(args.peak_mb)
        return
    roots = {"now": ROOT, **{path.resolve().name: path.resolve() for path in args.compare}}
    servers: dict[str, tuple[subprocess.Popen[bytes], str, Path]] = {}
    rates: dict[str, list[float]] = {name: [] for name in roots}
    cpu: dict[str, list[float]] = {name: [] for name in roots}
    client: dict[str, list[float]] = {name: [] for name in roots}  # the posting clients' CPU
    count = args.spans // args.batch
    print(f"load before: {os.getloadavg()}")
    try:
        for name, root in roots.items():
            tmp = Path(tempfile.mkdtemp(prefix=f"tc-otlp-bench-{name}-"))
            port = free_port()
            servers[name] = (serve(root, tmp, port), f"http://127.0.0.1:{port}", tmp)
        for server, url, _tmp in servers.values():
            wait_for_port(int(url.rsplit(":", 1)[1]), proc=server)
        for _ in range(args.rounds):
            for name, (server, url, _tmp) in servers.items():
                run = httpx.post(f"{url}/api/runs", json={"config": {"name": "bench"}}).json()
                bodies = [make_batch(run["id"], run["trace_id"], args.batch) for _ in range(count)]
                asyncio.run(post_all(url, bodies[:2], 1))  # warm up (schema, caches)
                before_cpu, before_client = cpu_seconds(server.pid), time.process_time()
                elapsed = asyncio.run(post_all(url, bodies[2:], args.concurrency))
                committed = (count - 2) * args.batch
                cpu[name].append((cpu_seconds(server.pid) - before_cpu) / committed * 1e6)
                client[name].append((time.process_time() - before_client) / committed * 1e6)
                rates[name].append(committed / elapsed)
    finally:
        for server, _url, _tmp in servers.values():
            stop(server)
    _server, _url, tmp = servers["now"]
    direct = in_process(bodies, tmp)
    size = sum(len(b) for b in bodies)
    print(f"load after: {os.getloadavg()}")
    print(
        f"spans: {committed} per round in {count - 2} requests of {args.batch}, "
        f"{args.concurrency} clients, {args.rounds} rounds per server"
    )
    print(f"protobuf bytes per span on the wire: {size / (count * args.batch):.0f}")
    for name in roots:
        shown = ", ".join(f"{rate:,.0f}" for rate in rates[name])
        spent = ", ".join(f"{micros:.1f}" for micros in cpu[name])
        posting = ", ".join(f"{micros:.1f}" for micros in client[name])
        print(
            f"{name}: HTTP ingest, committed: {shown} spans/s; server CPU {spent} us/span "
            f"(the clients: {posting} us/span)"
        )
    db = tmp / "tracecard.db"
    with contextlib.closing(sqlite3.connect(db)) as connection:  # no sqlite3 CLI needed
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = count * args.batch * args.rounds  # the warm-up requests included
    print(f"bytes per span on disk (SQLite, with indexes): {db_bytes(db) / stored:.0f}")
    print(f"in-process decode + insert_spans: {count * args.batch / direct:,.0f} spans/s")


if __name__ == "__main__":
    main()
