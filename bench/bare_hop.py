"""A bare aiohttp pass-through that records nothing: the peer `bench/proxy_overhead.py` measures
a recording tracecard against (issue #24: CPU per recorded call vs this hop, in the same run).

aiohttp's web server in front, aiohttp's client behind, on uvloop (as `tracecard serve` runs):
the request's headers minus hop-by-hop ones go on as they came, a whole answer comes back in one
`web.Response`, an SSE answer streams on chunk by chunk. Nothing is parsed, nothing is stored.

Run:  .venv/bin/python bench/bare_hop.py --port 8100 --upstream http://127.0.0.1:9000/mcp
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp
import uvloop
from aiohttp import web

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-connection",
        "host",
        "content-length",
        "date",
        "server",
    }
)


def make_app(upstream: str) -> web.Application:
    """One route: every method on every path goes to `upstream` (the path is not appended)."""
    app = web.Application()
    client: list[aiohttp.ClientSession] = []

    async def start(_app: web.Application) -> None:
        client.append(
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        )

    async def stop(_app: web.Application) -> None:
        await client[0].close()

    async def hop(request: web.Request) -> web.StreamResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP]
        body = await request.read()
        async with client[0].request(
            request.method, upstream, headers=headers, data=body or None
        ) as answer:
            back = [(k, v) for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP]
            if not answer.headers.get("Content-Type", "").startswith("text/event-stream"):
                return web.Response(status=answer.status, headers=back, body=await answer.read())
            stream = web.StreamResponse(status=answer.status, headers=back)
            await stream.prepare(request)
            async for chunk in answer.content.iter_any():
                await stream.write(chunk)
            await stream.write_eof()
            return stream

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_route("*", "/{tail:.*}", hop)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the URL every request goes to")
    args = parser.parse_args()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    web.run_app(
        make_app(args.upstream), host="127.0.0.1", port=args.port, print=None, access_log=None
    )


if __name__ == "__main__":
    main()
