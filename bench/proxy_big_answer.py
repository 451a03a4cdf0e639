"""Memory of one huge proxied answer: the server's peak RSS for an N MiB JSON-RPC result.

Starts `tracecard serve` in front of the scripted upstream (tests/servers/fake_upstream.py,
path `/huge`), sends one `tools/call` whose answer is `--mib` MiB of JSON with a
`Content-Length`, streams the answer, and prints the server's RSS before and its peak after.
JSON answers are held whole only up to `BUFFER_MAX` (16 MiB); past it they stream and only the
span's share is kept, so the peak should not grow with the answer.

Run: .venv/bin/python bench/proxy_big_answer.py [--mib 200]
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
from tests.servers.fake_upstream import fake_upstream  # noqa: E402
from tests.support.processes import free_port, spawn  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=200.0)
    size = int(parser.parse_args().mib * 1024 * 1024)
    with fake_upstream() as fake, tempfile.TemporaryDirectory(prefix="tc-big-") as tmp:
        config = Path(tmp) / "tracecard.toml"
        config.write_text(f'[upstreams.huge]\nurl = "{fake.url}/huge"\ntimeout_s = 300\n')
        port = free_port()
        args = [str(ROOT / ".venv" / "bin" / "tracecard"), "serve", "--config", str(config)]
        with spawn([*args, "--port", str(port), "--db", str(Path(tmp) / "tc.db")], port) as proc:
            base = f"http://127.0.0.1:{port}"
            run = httpx.post(f"{base}/api/runs", json={}, timeout=30).json()
            before = _rss_kib(proc.pid, "VmRSS")
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            call["params"] = {"name": "t", "arguments": {}, "size": size}  # type: ignore[assignment]
            received = 0
            headers = {"accept": "application/json, text/event-stream"}
            with httpx.stream(
                "POST", run["urls"]["huge"], json=call, headers=headers, timeout=300
            ) as answer:
                for chunk in answer.iter_raw():
                    received += len(chunk)
            peak = _rss_kib(proc.pid, "VmHWM")
    print(
        f"answer {received / 2**20:.1f} MiB: server RSS before {before / 1024:.0f} MiB, "
        f"peak {peak / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
