"""tracecard's own CPU per recorded `tools/call`, without the HTTP server in front (#24 item 2).

The app as served (`asgi_app`: the security guard, the proxy's router, the MCP proxy, the
recorder, the exporter) is called in process as uvicorn would call it, with an ASGI scope, a
`receive` that hands over the body and a `send` that drops the answer; the upstream is the SDK
test server (stateless + JSON) in its own process. So the figure is tracecard's code alone:
no uvicorn, no agent-side socket. CPU is read with `time.thread_time` (the loop thread) and
`time.process_time` (every thread: the exporter's and the spool's too), which count neither the
upstream's CPU nor time the thread was preempted.

`--profile opcodes` counts the loop thread's Python bytecodes, calls and C calls a call, by
function (exact, where CPU clocks drift); `--compare PATH` runs another checkout in a
subprocess in alternating rounds (paired A/B).

    .venv/bin/python bench/proxy_path.py [--calls 4000] [--clients 32] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parents[1]


def _request(call_id: int, mode: str = "stateless") -> bytes:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
    if mode == "stateless":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    message = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params}
    return orjson.dumps(message)


_HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"user-agent", b"Python/3.11 aiohttp/3.13"),
    (b"accept", b"application/json, text/event-stream"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"content-type", b"application/json"),
]


async def call_app(
    app: Any, method: str, path: str, body: bytes, extra: list[tuple[bytes, bytes]]
) -> tuple[int, Any, bytes]:
    """One request to the ASGI `app` as uvicorn would hand it over: (status, headers, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [*_HEADERS, *extra, (b"content-length", str(len(body)).encode())],
        "state": {},
    }
    sent = False

    async def receive() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    answer: list[bytes] = []
    start: dict[str, Any] = {}

    async def send(event: Any) -> None:
        if event["type"] == "http.response.start":
            start.update(event)
        else:
            answer.append(event.get("body", b""))

    await app(scope, receive, send)
    return start.get("status", 0), start.get("headers", []), b"".join(answer)


async def _lifespan(app: Any) -> tuple[asyncio.Task[Any], asyncio.Queue[Any]]:
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    started = asyncio.get_running_loop().create_future()

    async def receive() -> Any:
        return await inbox.get()

    async def send(message: Any) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set_result(None)
        elif message["type"] == "lifespan.startup.failed":
            started.set_exception(RuntimeError(message.get("message")))

    task = asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    )
    await inbox.put({"type": "lifespan.startup"})
    await started
    return task, inbox


async def _run(args: argparse.Namespace, upstream: str, db: str) -> None:
    sys.path.insert(0, str(Path(args.root).resolve()))
    from tests.support.proxy import rpc
    from tracecard.server.app import asgi_app
    from tracecard.server.settings import load_settings

    settings = load_settings(None, environ={}, db=db, upstreams={"json": {"url": upstream}})
    app = asgi_app(settings)
    life, inbox = await _lifespan(app)
    if args.app == "wire":
        app = _wire_app(upstream)
    if args.patch:  # an experiment: a file of code run with `app` in scope
        exec(Path(args.patch).read_text(), {"app": app, "sys": sys})
    if args.app == "router":
        app = app.app
    counter = 0
    failures = 0

    async def post(message: bytes, extra: list[tuple[bytes, bytes]]) -> tuple[int, Any, bytes]:
        """One POST to /mcp/json as uvicorn would hand it over: (status, headers, body)."""
        return await call_app(app, "POST", "/mcp/json", message, extra)

    sessions: list[list[tuple[bytes, bytes]]] = []
    if args.mode == "session":  # one MCP session per client, opened before any round
        for _ in range(args.clients):
            hello = {"capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
            hello["protocolVersion"] = "2025-11-25"
            status, headers, _body = await post(orjson.dumps(rpc("initialize", hello, id=0)), [])
            session = next(v for k, v in headers if k.lower() == b"mcp-session-id")
            extra = [(b"mcp-session-id", session), (b"mcp-protocol-version", b"2025-11-25")]
            await post(orjson.dumps(rpc("notifications/initialized", id=None)), extra)
            sessions.append(extra)
    else:
        modern = [(b"mcp-protocol-version", b"2026-07-28")]
        modern += [(b"mcp-method", b"tools/call"), (b"mcp-name", b"echo")]
        sessions = [modern] * args.clients

    async def one(extra: list[tuple[bytes, bytes]]) -> None:
        nonlocal counter, failures
        counter += 1
        status, _headers, answer = await post(_request(counter, args.mode), extra)
        if status != 200 or b'"hi"' not in answer:
            failures += 1

    async def batch(calls: int) -> None:
        queue = iter(range(calls))

        async def client(extra: list[tuple[bytes, bytes]]) -> None:
            for _ in queue:
                await one(extra)

        await asyncio.gather(*(client(sessions[i]) for i in range(args.clients)))

    await batch(500)  # warm-up: connections, caches
    await asyncio.sleep(0.5)
    for _ in range(args.rounds_each):
        request = sys.stdin.readline()
        if not request:
            break
        counts = {"opcode": 0, "call": 0, "c_call": 0}
        where: dict[str, int] = {}
        if args.profile == "opcodes":  # deterministic: Python bytecodes and calls a request
            _count_opcodes(counts, where)
        threads0 = _threads()
        t0, p0 = time.thread_time(), time.process_time()
        await batch(args.calls)
        t1 = time.thread_time()
        if args.profile == "opcodes":
            sys.settrace(None)
            sys.setprofile(None)
            top = sorted(where.items(), key=lambda item: -item[1])[: args.top]
            for name, count in top:
                print(f"{count / args.calls:8.1f}  {name}", file=sys.stderr)
        # the last spans are committed (batch_delay_ms 0.2 s + store_every_ms 1 s after a call)
        await asyncio.sleep(1.5)
        p1 = time.process_time()
        threads1 = _threads()
        result = {
            "loop_us": (t1 - t0) / args.calls * 1e6,
            "process_us": (p1 - p0) / args.calls * 1e6,
            "failures": failures,
            **(
                {f"{k}s_per_call": round(v / args.calls, 1) for k, v in counts.items()}
                if args.profile == "opcodes"
                else {}
            ),
            "threads_us": {
                name: round((threads1[name] - threads0.get(name, 0.0)) / args.calls * 1e6, 1)
                for name in threads1
            },
        }
        print(json.dumps(result), flush=True)
    await inbox.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(life, 30)


def _count_opcodes(counts: dict[str, int], where: dict[str, int]) -> None:
    """Count this thread's bytecodes (by function, into `where`), calls and C calls."""

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        counts[event] = counts.get(event, 0) + 1
        if event == "opcode":
            code = frame.f_code
            name = f"{code.co_qualname} ({Path(code.co_filename).name}:{code.co_firstlineno})"
            where[name] = where.get(name, 0) + 1
        return trace

    def c_calls(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            counts["c_call"] += 1

    sys.setprofile(c_calls)
    sys.settrace(trace)


def _wire_app(upstream: str) -> Any:
    """The floor: the same upstream client forwarding the body, nothing read, nothing recorded."""
    from yarl import URL

    from tracecard.server.proxy.wire import WireClient

    client = WireClient(100, 5.0)
    url = URL(upstream)
    forward = [(n.decode(), v.decode()) for n, v in _HEADERS if n != b"host"]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = (await receive())["body"]
        response = await client.open("POST", url, forward, body)
        parts = []
        while chunk := await response.read_chunk():
            parts.append(chunk)
        await response.aclose()
        answer = b"".join(parts)
        headers = [(n, v) for n, v in response.raw_headers if n.lower() != b"date"]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def _threads() -> dict[str, float]:
    """CPU seconds of each thread of this process, by name (from /proc)."""
    import threading

    ticks = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    found: dict[str, float] = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        name = names.get(int(task), stat[stat.index("(") + 1 : stat.rindex(")")])
        fields = stat[stat.rindex(")") + 2 :].split()
        found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return found


def _child(args: argparse.Namespace) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(_run(args, args.upstream, args.db))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000, help="calls per round")
    parser.add_argument(
        "--mode",
        choices=["stateless", "session"],
        default="stateless",
        help="stateless + JSON (2026-07-28) or sessions + SSE (2025-11-25)",
    )
    parser.add_argument("--clients", type=int, default=32, help="calls in flight")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per checkout")
    parser.add_argument("--compare", action="append", type=Path, default=[])
    parser.add_argument("--profile", choices=["opcodes"], default=None)
    parser.add_argument("--top", type=int, default=40, help="functions listed by --profile")
    parser.add_argument("--app", choices=["tracecard", "wire", "router"], default="tracecard")
    parser.add_argument(
        "--arm",
        action="append",
        default=[],
        help="NAME=ROOT[,app=tracecard|router|wire][,patch=FILE]: another arm, paired",
    )
    parser.add_argument("--patch", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", default=str(HERE), help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--rounds-each", type=int, default=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    sys.path.insert(0, str(HERE))
    from tests.support.processes import mcp_tool_server

    arms: dict[str, dict[str, str]] = {"main": {"root": str(HERE), "app": args.app}}
    for path in args.compare:
        arms[path.resolve().name] = {"root": str(path.resolve()), "app": args.app}
    for spec in args.arm:
        name, _, rest = spec.partition("=")
        root, *options = rest.split(",")
        arm = {"root": str(Path(root or HERE).resolve()), "app": args.app}
        arm.update(option.split("=", 1) for option in options)
        arms[name] = arm
    roots = {name: Path(arm["root"]) for name, arm in arms.items()}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
    flags = ("--stateless", "--json") if args.mode == "stateless" else ()
    with tempfile.TemporaryDirectory() as folder, mcp_tool_server(*flags) as url:
        children = {}
        for name, root in roots.items():
            command = [sys.executable, __file__, "--child", "--root", str(root)]
            command += ["--upstream", url, "--db", f"sqlite:///{folder}/{name}.db"]
            command += ["--calls", str(args.calls), "--clients", str(args.clients)]
            command += ["--mode", args.mode]
            command += ["--rounds-each", str(args.rounds)]
            command += ["--app", arms[name]["app"]]
            if "patch" in arms[name]:
                command += ["--patch", str(Path(arms[name]["patch"]).resolve())]
            if args.profile:
                command += ["--profile", args.profile, "--top", str(args.top)]
            children[name] = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root
            )
        for round_no in range(args.rounds):
            order = list(roots) if round_no % 2 == 0 else list(reversed(roots))
            for name in order:
                child = children[name]
                assert child.stdin is not None and child.stdout is not None
                child.stdin.write("go\n")
                child.stdin.flush()
                line = child.stdout.readline()
                if not line:
                    raise SystemExit(f"{name}: the child ended (see its stderr)")
                results[name].append(json.loads(line))
        for child in children.values():
            assert child.stdin is not None
            child.stdin.close()
            child.wait(60)
    report: dict[str, Any] = {"load": os.getloadavg(), "calls": args.calls}
    for name, rounds in results.items():
        report[name] = {
            "loop_us": [round(r["loop_us"], 1) for r in rounds],
            "process_us": [round(r["process_us"], 1) for r in rounds],
            "loop_us_median": round(statistics.median(r["loop_us"] for r in rounds), 1),
            "process_us_median": round(statistics.median(r["process_us"] for r in rounds), 1),
            "failures": rounds[-1]["failures"] if rounds else None,
            **{k: v for k, v in (rounds[-1] if rounds else {}).items() if k.endswith("_per_call")},
            "threads_us": rounds[-1]["threads_us"] if rounds else None,
        }
    if len(results) > 1:  # paired: each round of an arm against the first arm's same round
        first = next(iter(results))
        for name, rounds in results.items():
            if name != first:
                ratios = sorted(
                    r["process_us"] / f["process_us"]
                    for r, f in zip(rounds, results[first], strict=True)
                )
                report[name]["process_vs_" + first + "_median_ratio"] = round(
                    statistics.median(ratios), 3
                )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
