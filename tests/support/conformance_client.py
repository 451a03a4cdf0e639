"""The official MCP SDK client (Python `mcp`) as a conformance-suite client command.

The suite's client mode plays the server for one scenario and runs this with the server's URL as
the last argument (`MCP_CONFORMANCE_SCENARIO` names the scenario). With
`TRACECARD_CONFORMANCE_VIA=<folder>` set, a real tracecard (uvicorn, SQLite in that folder) is
started first with the suite's server as its upstream `conformance`, the client talks to
tracecard instead, and the spans recorded are written to `<folder>/spans.json`.

Run as `python -m tests.support.conformance_client URL` from the repository root.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


async def _play(url: str, scenario: str) -> str:
    """What the scenario asks of a client; returns the text the server answered with."""
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            if scenario != "sse-retry":
                return ",".join(tool.name for tool in tools.tools)
            result = await client.call_tool("test_reconnection", {})
            return str(result.content[0].text)  # type: ignore[union-attr]


def _through_tracecard(upstream: str, scenario: str, folder: Path) -> str:
    from sqlmodel import select

    from tests.support.proxy import tracecard_for
    from tests.support.tracecard import await_flush, runtime_of
    from tracecard.traces.models import SpanRow

    folder.mkdir(parents=True, exist_ok=True)
    with tracecard_for({"conformance": {"url": upstream}}, folder) as tracecard:
        answer = asyncio.run(_play(f"{tracecard.url}/mcp/conformance", scenario))
        await_flush(tracecard)
        with runtime_of(tracecard).store.session() as session:
            rows = session.scalars(select(SpanRow)).all()
            spans: list[dict[str, Any]] = [
                {
                    "name": row.name,
                    "status_code": row.status_code,
                    "error_type": row.error_type,
                    "attributes": row.attributes,
                    "ended": row.end_ns is not None,
                }
                for row in rows
            ]
    (folder / "spans.json").write_text(json.dumps(spans, default=str))
    return answer


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    via = os.environ.get("TRACECARD_CONFORMANCE_VIA")
    if via:
        answer = _through_tracecard(url, scenario, Path(via))
    else:
        answer = asyncio.run(_play(url, scenario))
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
