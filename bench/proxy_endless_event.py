"""Memory of one SSE event that never ends: the server's peak RSS with and without the bound.

Starts `tracecard serve` in front of the endless-event upstream (tests/servers/endless_event.py:
a tool call answered with a priming event, then one event that grows without a line end up to
256 MiB) and sends one `tools/call`. With `max_sse_event_bytes` (default 16 MiB) tracecard stops
reading at the bound and answers the call with a JSON-RPC error; with `--limit-mib 1024` (as
good as no bound for this upstream) it reads all 256 MiB. Prints what the agent got and the
server's RSS before and at its peak.

Run: .venv/bin/python bench/proxy_endless_event.py [--limit-mib 16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.otlp_ingest import _rss_kib  # noqa: E402
from tests.servers.endless_event import endless_upstream  # noqa: E402
from tests.support.processes import free_port, spawn  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=int, default=16)
    limit = parser.parse_args().limit_mib * 1024 * 1024
    with endless_upstream() as upstream, tempfile.TemporaryDirectory(prefix="tc-sse-") as tmp:
        config = Path(tmp) / "tracecard.toml"
        config.write_text(
            f"max_sse_event_bytes = {limit}\n"
            f'[upstreams.endless]\nurl = "{upstream.url}"\ntimeout_s = 300\n'
        )
        port = free_port()
        args = [str(ROOT / ".venv" / "bin" / "tracecard"), "serve", "--config", str(config)]
        with spawn([*args, "--port", str(port), "--db", str(Path(tmp) / "tc.db")], port) as proc:
            base = f"http://127.0.0.1:{port}"
            run = httpx.post(f"{base}/api/runs", json={}, timeout=30).json()
            before = _rss_kib(proc.pid, "VmRSS")
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            call["params"] = {"name": "endless", "arguments": {}}  # type: ignore[assignment]
            headers = {"accept": "application/json, text/event-stream"}
            received, tail = 0, b""
            with httpx.stream(
                "POST", run["urls"]["endless"], json=call, headers=headers, timeout=300
            ) as answer:
                for chunk in answer.iter_raw():
                    received += len(chunk)
                    tail = (tail + chunk)[-400:]
            peak = _rss_kib(proc.pid, "VmHWM")
    ending = "a JSON-RPC error" if b'"error"' in tail else "no answer (the stream just ended)"
    print(
        f"limit {limit / 2**20:.0f} MiB: the agent got {received / 2**20:.1f} MiB and "
        f"{ending}; server RSS before {before / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
