"""The security guard's cost per request, in process: the guard around an app that does nothing.

A proxied MCP `tools/call` POST with the headers the official `mcp` client sends (Host,
Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, User-Agent, Content-Length, ...),
with and without an API token, against the bare app. Prints JSON: microseconds per request.

Run:  .venv/bin/python bench/security_guard.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracecard.server.security import SecurityGuard  # noqa: E402
from tracecard.server.settings import Settings  # noqa: E402
from tracecard.viewer.csrf import FormTokens  # noqa: E402

HEADERS = [
    (b"host", b"127.0.0.1:7800"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-session-id", b"6f1c2b0e8a9d4e5f"),
    (b"mcp-protocol-version", b"2025-11-25"),
    (b"user-agent", b"python-httpx/0.28.1"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"connection", b"keep-alive"),
    (b"content-length", b"120"),
]


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    return None


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(message: dict[str, Any]) -> None:
    return None


async def _time(app: Any, extra: list[tuple[bytes, bytes]], requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        scope = {"type": "http", "method": "POST", "path": "/mcp/tools", "headers": HEADERS + extra}
        await app(scope, _receive, _send)
    return (time.perf_counter() - started) / requests * 1e6


async def main(requests: int) -> dict[str, Any]:
    forms = FormTokens(key=lambda: b"k" * 32)
    open_guard = SecurityGuard(_app, Settings(), forms)
    token_guard = SecurityGuard(_app, Settings(api_token="s3cret"), forms)
    token = [(b"authorization", b"Bearer s3cret")]
    figures = {}
    for _ in range(2):  # the second round is the one reported (warm)
        figures = {
            "bare_app_us": await _time(_app, [], requests),
            "guard_no_token_us": await _time(open_guard, [], requests),
            "guard_with_token_us": await _time(token_guard, token, requests),
        }
    return {
        "requests": requests,
        "python": platform.python_version(),
        **{k: round(v, 2) for k, v in figures.items()},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.requests)), indent=2))
