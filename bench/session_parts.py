"""Where a session's CPU goes, step by step, in process (#24: a session's open and close).

The app as served (`asgi_app`) is called in process as uvicorn would call it (the harness of
`bench/proxy_path.py`), with the SDK test server (sessions) as the upstream. Each session is an
`initialize`, `notifications/initialized`, one `tools/call` and a DELETE, one after another or
`--concurrent` at a time. Prints the CPU a session by thread (from /proc) and, timed with
`time.thread_time` in whichever thread runs them, the steps of an ad-hoc run's life: its row's
insert, the flush at its end, and the end itself (row read, summary, UPDATE, search document).

    .venv/bin/python bench/session_parts.py [--sessions 256] [--concurrent 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "bench"))

from proxy_path import _lifespan, _request, _threads, call_app  # noqa: E402

_LOCK = threading.Lock()
_STEPS: dict[str, list[float]] = {}  # step -> [calls, CPU seconds]


def _timed(owner: Any, name: str, label: str) -> None:
    """Wrap `owner.name` so that each call adds its thread's CPU time to `label`."""
    function: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent = time.thread_time() - start
            with _LOCK:
                step = _STEPS.setdefault(label, [0, 0.0])
                step[0] += 1
                step[1] += spent

    setattr(owner, name, timed)


def _instrument() -> None:
    from tracecard.server.runs import adhoc
    from tracecard.traces import exporter, run_summary
    from tracecard.traces.store import Store

    _timed(Store, "insert_run", "insert the run's row")
    _timed(exporter.StoringBatchProcessor, "force_flush", "flush at the end")
    _timed(adhoc, "_write_end", "end (all of the below)")
    _timed(Store, "read_run", "  read the row")
    _timed(run_summary, "summarize_runs", "  summary")
    _timed(run_summary, "search_document", "  search document")
    _timed(Store, "write_run", "  UPDATE")
    _timed(run_summary, "write_documents", "  write the document")


async def _run(upstream: str, db: str, args: argparse.Namespace) -> dict[str, Any]:
    from tests.support.proxy import rpc
    from tracecard.server.app import asgi_app
    from tracecard.server.settings import load_settings

    settings = load_settings(None, environ={}, db=db, upstreams={"up": {"url": upstream}})
    app = asgi_app(settings)
    life, inbox = await _lifespan(app)

    async def request(method: str, message: Any, extra: list[tuple[bytes, bytes]]) -> Any:
        body = orjson.dumps(message) if message is not None else b""
        _status, headers, answer = await call_app(app, method, "/mcp/up", body, extra)
        return headers, answer

    async def session() -> None:
        hello = {"capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        hello["protocolVersion"] = "2025-11-25"
        headers, _ = await request("POST", rpc("initialize", hello, id=0), [])
        session_id = next(v for k, v in headers if k.lower() == b"mcp-session-id")
        extra = [(b"mcp-session-id", session_id), (b"mcp-protocol-version", b"2025-11-25")]
        await request("POST", rpc("notifications/initialized", id=None), extra)
        _, answer = await request("POST", orjson.loads(_request(1, "session")), extra)
        if b'"hi"' not in answer:
            raise RuntimeError(f"bad answer: {answer[:200]!r}")
        await request("DELETE", None, extra)

    async def sessions(count: int) -> None:
        for start in range(0, count, args.concurrent):
            batch = min(args.concurrent, count - start)
            await asyncio.gather(*(session() for _ in range(batch)))

    await sessions(32)  # warm-up: connections, caches, worker threads
    await asyncio.sleep(1.5)
    _instrument()
    threads0, loop0, process0 = _threads(), time.thread_time(), time.process_time()
    started = time.perf_counter()
    await sessions(args.sessions)
    loop1, elapsed = time.thread_time(), time.perf_counter() - started
    await asyncio.sleep(1.5)  # the last ends are written (counted: they are the cost)
    process1, threads1 = time.process_time(), _threads()
    await inbox.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(life, 30)
    per = 1000 / args.sessions
    return {
        "sessions": args.sessions,
        "concurrent": args.concurrent,
        "sessions_per_s": round(args.sessions / elapsed, 1),
        "cpu_ms_per_session": round((process1 - process0) * per, 3),
        "loop_thread_ms": round((loop1 - loop0) * per, 3),
        # (threads that ended meanwhile are not in /proc any more: the total above counts them)
        "threads_ms": {
            name: round((threads1[name] - threads0.get(name, 0.0)) * per, 3)
            for name in threads1
            if threads1[name] - threads0.get(name, 0.0) > 0
        },
        "steps_ms": {
            label: {"calls": int(calls), "ms_per_session": round(cpu * per, 3)}
            for label, (calls, cpu) in _STEPS.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--concurrent", type=int, default=32, help="sessions at a time")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    from tests.support.processes import mcp_tool_server

    with tempfile.TemporaryDirectory() as folder, mcp_tool_server() as url:
        report = asyncio.run(_run(url, f"sqlite:///{folder}/sessions.db", args))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
