"""What an HTTP server layer costs per request, with nothing behind it.

Three servers answer every POST with the same small JSON body, each on uvloop: uvicorn with a
bare ASGI app (httptools, as `tracecard serve` runs), aiohttp's web server (the bare hop's front
half), and an asyncio protocol on httptools that writes head and body in one write (the floor
for a Python HTTP/1.1 server). 32 keep-alive clients post for `--seconds` a round, rounds
alternate, and each server's CPU per request comes from /proc. This says how much of the
proxy's CPU per call a server layer of tracecard's own could save (issue #24).

Run:  .venv/bin/python bench/server_layers.py [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import free_port, stop, wait_for_port  # noqa: E402

BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}'
KINDS = ("uvicorn", "aiohttp", "httptools")


def serve(kind: str, port: int) -> None:
    """Run one server (in a child process) until it is stopped."""
    if kind == "uvicorn":
        import uvicorn

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            more = True
            while more:
                more = (await receive()).get("more_body", False)
            headers = [(b"content-type", b"application/json")]
            headers.append((b"content-length", str(len(BODY)).encode()))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": BODY})

        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port,
            loop="uvloop",
            http="httptools",
            lifespan="off",
            log_level="warning",
            access_log=False,
        )
    elif kind == "aiohttp":
        import uvloop
        from aiohttp import web

        async def handler(request: web.Request) -> web.Response:
            await request.read()
            return web.Response(body=BODY, content_type="application/json")

        application = web.Application()
        application.router.add_post("/{tail:.*}", handler)
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        web.run_app(application, host="127.0.0.1", port=port, access_log=None, print=None)
    else:
        import httptools
        import uvloop

        answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        answer += b"content-length: %d\r\n\r\n%s" % (len(BODY), BODY)

        class Protocol(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport: Any = transport
                self.parser = httptools.HttpRequestParser(self)

            def data_received(self, data: bytes) -> None:
                self.parser.feed_data(data)

            def on_message_complete(self) -> None:
                self.transport.write(answer)

        async def main() -> None:
            server = await asyncio.get_running_loop().create_server(Protocol, "127.0.0.1", port)
            await server.serve_forever()

        uvloop.run(main())


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(url: str, seconds: float, clients: int = 32) -> int:
    done = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        end = time.monotonic() + seconds
        headers = {"content-type": "application/json"}

        async def client() -> None:
            nonlocal done
            while time.monotonic() < end:
                async with http.post(url, data=REQUEST, headers=headers) as response:
                    await response.read()
                done += 1

        await asyncio.gather(*(client() for _ in range(clients)))
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    figures: dict[str, list[float]] = {kind: [] for kind in KINDS}
    print(f"load before: {os.getloadavg()}")
    try:
        for kind in KINDS:
            port = free_port()
            command = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
            servers[kind] = (subprocess.Popen(command, start_new_session=True), port)
            wait_for_port(port, proc=servers[kind][0])
        for _ in range(args.rounds):
            for kind, (process, port) in servers.items():
                url = f"http://127.0.0.1:{port}/mcp"
                asyncio.run(drive(url, 1.0))  # warm-up
                before = cpu_seconds(process.pid)
                count = asyncio.run(drive(url, args.seconds))
                figures[kind].append((cpu_seconds(process.pid) - before) / count * 1e6)
    finally:
        for process, _port in servers.values():
            stop(process)
    print(f"load after: {os.getloadavg()}")
    for kind, values in figures.items():
        shown = " / ".join(f"{value:.1f}" for value in values)
        print(f"{kind}: {shown} us of server CPU a request")


if __name__ == "__main__":
    main()
