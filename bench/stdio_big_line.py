"""One big stdio answer through the bridge (#24 item 4): a stdio server that answers
`tools/call` with one pre-built JSON-RPC line of `--mb` MB (a text result), called through
tracecard (HTTP to the proxy, the bridge, the server's stdout), against the same call made
directly over the server's stdin/stdout. The server costs nothing per call (it writes bytes it
built at start), so the difference is the bridge's: reading the line, parsing, recording (the
stored copy capped), answering over HTTP.

Run: .venv/bin/python bench/stdio_big_line.py [--mb 20] [--calls 5]
"""

from __future__ import annotations

import argparse
import http.client as http_client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import free_port, stop, wait_for_port  # noqa: E402

SERVER = r"""
import sys, orjson
size = int(sys.argv[1])
text = "x" * size
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    message = orjson.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities":
                  {"tools": {}}, "serverInfo": {"name": "big", "version": "1"}}
    elif message["method"] == "tools/list":
        result = {"tools": [{"name": "big", "inputSchema": {"type": "object"}}]}
    elif message["method"] == "tools/call":
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        result = {}
    out.write(orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + b"\n")
    out.flush()
"""
ACCEPT = {"accept": "application/json", "content-type": "application/json"}
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
CALL["params"] = {"name": "big", "arguments": {}}


def direct(server: list[str], calls: int) -> list[float]:
    """The same call over the server's own stdio: write the request, read the answer's line."""
    proc = subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(orjson.dumps(HELLO) + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        proc.stdin.write(orjson.dumps(CALL) + b"\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        orjson.loads(line)
        times.append(time.perf_counter() - started)
    proc.stdin.close()
    proc.wait(10)
    return times


def through(port: int, calls: int) -> tuple[list[float], int]:
    """The call through tracecard, from a plain `http.client` connection (httpx's own reading
    of a 20 MB answer would be counted as the bridge's time otherwise)."""
    times, size = [], 0
    http = http_client.HTTPConnection("127.0.0.1", port, timeout=300)
    http.request("POST", "/mcp/big", orjson.dumps(HELLO), ACCEPT)
    answer = http.getresponse()
    answer.read()
    headers = {"mcp-session-id": str(answer.getheader("mcp-session-id")), **ACCEPT}
    for _ in range(calls):
        started = time.perf_counter()
        http.request("POST", "/mcp/big", orjson.dumps(CALL), headers)
        content = http.getresponse().read()
        body = orjson.loads(content)
        times.append(time.perf_counter() - started)
        if "result" not in body:
            raise SystemExit(f"not an answer: {content[:500]!r}")
        size = len(content)
    http.close()
    return times, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    tmp = Path(tempfile.mkdtemp(prefix="tc-stdio-big-"))
    script = tmp / "big_server.py"
    script.write_text(SERVER)
    server = [sys.executable, str(script), str(size)]
    config = tmp / "tracecard.toml"
    config.write_text(f"[upstreams.big]\ncommand = {orjson.dumps(server).decode()}\n")
    port = free_port()
    tracecard = subprocess.Popen(
        [str(ROOT / ".venv/bin/tracecard"), "serve", "--config", str(config), "--port", str(port)]
        + ["--db", f"sqlite:///{tmp / 'tracecard.db'}"],
        cwd=tmp,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc=tracecard)
        bridged, answer_size = through(port, args.calls)
    finally:
        stop(tracecard)
    alone = direct(server, args.calls)
    load = os.getloadavg()[0]
    base, total = statistics.median(alone), statistics.median(bridged)
    mb = answer_size / 1e6
    print(f"load average {load:.1f} on {os.cpu_count()} cores; a {mb:.1f} MB line x {args.calls}")
    print(f"direct stdio          median {base:7.3f} s  {mb / base:7.0f} MB/s")
    print(f"through tracecard     median {total:7.3f} s  {mb / total:7.0f} MB/s")
    added = total - base
    print(f"the bridge adds       median {added:7.3f} s  ({mb / max(added, 1e-9):.0f} MB/s)")


if __name__ == "__main__":
    main()
