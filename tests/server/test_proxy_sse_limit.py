"""One SSE event is bounded: an upstream whose event never ends cannot grow tracecard's memory.

The upstream (tests/servers/endless_event.py, on uvicorn) answers a tool call with a priming
event, a progress notification and then one event that never ends. tracecard relays what came,
stops reading at `max_sse_event_bytes`, answers the call with a JSON-RPC error and records the
span cut with a marker; the progress notification before it and later calls are kept.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.servers.endless_event import MAX_BYTES, EndlessUpstream, endless_upstream
from tests.support.proxy import MCP_HEADERS, named, new_run, rpc, run_spans, tracecard_for
from tests.support.tracecard import RunningServer
from tracecard.server.proxy.sse import SseParser

LIMIT = 256 * 1024  # below the SDK client's own 1 MiB, so the client sees tracecard's answer
CAP = 4096


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EndlessUpstream, RunningServer]]:
    folder = tmp_path_factory.mktemp("sse-limit")
    with (
        endless_upstream() as upstream,
        tracecard_for(
            {
                "endless": {"url": upstream.url},
                "model": {"url": upstream.url.replace("/mcp", "/v1"), "kind": "openai"},
            },
            folder,
            max_sse_event_bytes=LIMIT,
            recording={"payload_cap_bytes": CAP},
        ) as tracecard,
    ):
        yield upstream, tracecard


def _wait_for_the_upstream_to_stop(upstream: EndlessUpstream, streams: int) -> None:
    for _ in range(200):  # it notices the closed connection a moment later
        if len(upstream.reader_left) >= streams:
            return
        time.sleep(0.05)


def test_an_endless_event_ends_in_a_jsonrpc_error_and_a_cut_span(
    servers: tuple[EndlessUpstream, RunningServer],
) -> None:
    upstream, tracecard = servers
    run = new_run(tracecard.url)
    url = run["urls"]["endless"]
    call = rpc("tools/call", {"name": "endless", "arguments": {}}, id=7)
    with httpx.stream("POST", url, json=call, headers=MCP_HEADERS, timeout=60) as response:
        received = b"".join(response.iter_raw())  # it ends: tracecard ended the stream
    _wait_for_the_upstream_to_stop(upstream, 1)
    assert upstream.reader_left[-1] and upstream.streamed[-1] < MAX_BYTES  # it stopped
    assert LIMIT < len(received) < 16 * LIMIT  # what came before the cut was relayed
    events = SseParser().feed(received)
    assert [e.id for e in events][:1] == ["e0"]
    assert json.loads(events[1].data)["method"] == "notifications/progress"
    assert events[-2].event == "tracecard-cut"  # the half event, ended as a type clients skip
    reply = json.loads(events[-1].data)
    assert reply["id"] == 7 and reply["error"]["code"] == -32000
    assert "max_sse_event_bytes" in reply["error"]["message"]
    assert reply["error"]["data"]["reason"] == "response_too_large"

    listed = httpx.post(url, json=rpc("tools/list", id=8), headers=MCP_HEADERS, timeout=30)
    assert listed.json()["result"]["tools"][0]["name"] == "endless"  # later calls still work

    spans = run_spans(tracecard.url, run["id"])
    span = named(spans, "tools/call endless")
    assert span["status"]["code"] == 2 and span["attributes"]["error.type"] == "response_too_large"
    body = span["attributes"]["tracecard.response.body"]
    assert body.startswith('data: {"jsonrpc":"2.0","id":7,"result":{"content"')  # raw event
    marker = f"…[truncated by tracecard: an SSE event over {LIMIT} bytes, stream ended]"
    assert body.endswith(marker)
    assert len(body) < CAP + 100 and span["attributes"]["tracecard.truncated"] is True
    assert [e["name"] for e in span["events"]] == ["notifications/progress"]  # kept
    assert named(spans, "tools/list")["status"]["code"] != 2


def test_the_sdk_client_gets_the_error_as_a_jsonrpc_error(
    servers: tuple[EndlessUpstream, RunningServer], tmp_path: Path
) -> None:
    _upstream, tracecard = servers
    url = new_run(tracecard.url)["urls"]["endless"]

    async def call() -> MCPError:
        async with httpx2.AsyncClient(timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("endless", {})
                return raised.value

    error = asyncio.run(call())
    assert "max_sse_event_bytes" in str(error)


def test_a_model_stream_with_an_endless_event_is_ended_and_recorded(
    servers: tuple[EndlessUpstream, RunningServer],
) -> None:
    upstream, tracecard = servers
    before = len(upstream.reader_left)
    run = new_run(tracecard.url)
    request = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    url = f"{run['urls']['model']}/chat/completions"
    with pytest.raises(httpx.RemoteProtocolError):  # cut, as a broken upstream would be
        with httpx.stream("POST", url, json=request, timeout=60) as response:
            for _chunk in response.iter_raw():
                pass
    _wait_for_the_upstream_to_stop(upstream, before + 1)
    assert upstream.reader_left[-1] and upstream.streamed[-1] < MAX_BYTES
    span = named(run_spans(tracecard.url, run["id"]), "chat m")
    assert span["attributes"]["error.type"] == "response_too_large"
    assert "max_sse_event_bytes" in span["status"]["message"]
    assert span["attributes"]["tracecard.llm.stream.complete"] is False
    assert "Hel" in span["attributes"]["gen_ai.output.messages"]  # what came before is kept
