"""`/healthz` counts the spans the batch processor's full queue dropped, and says degraded.

Real tracecard (uvicorn) with a tiny span queue and no spool, the SDK test server behind it, the
official `mcp` client as the agent; another process holds SQLite's write lock while the agent
calls, so the recorder cannot keep up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import mcp_tool_server
from tests.support.proxy import new_run, run_spans, tracecard_for
from tests.support.tracecard import runtime_of
from tests.traces.test_span_queue import hold_sqlite_lock, release

CALLS = 30


async def _calls(url: str) -> None:
    async with httpx2.AsyncClient(timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            for index in range(CALLS):
                await client.call_tool("add", {"a": index, "b": 1})


@contextlib.contextmanager
def _warnings_of(name: str) -> Iterator[list[str]]:
    """What `name` logs at WARNING (the server's logging set-up replaces pytest's handler)."""
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def test_healthz_reports_spans_the_full_queue_dropped(tmp_path: Path) -> None:
    recording = {"batch_max_queue": 4, "spool": False, "batch_delay_ms": 20}
    with (
        mcp_tool_server() as upstream,
        tracecard_for({"tools": {"url": upstream}}, tmp_path, recording=recording) as server,
    ):
        assert httpx.get(f"{server.url}/healthz").json()["recording"]["queue_dropped"] == 0
        run = new_run(server.url)
        holder = hold_sqlite_lock(tmp_path / "tracecard.db")
        try:
            with _warnings_of("tracecard.traces.exporter") as warned:
                asyncio.run(_calls(run["urls"]["tools"]))  # the agent is answered all the same
        finally:
            release(holder)
        stored = [s for s in run_spans(server.url, run["id"]) if s["name"] == "tools/call add"]
        health = httpx.get(f"{server.url}/healthz").json()
    dropped = health["recording"]["queue_dropped"]
    assert health["status"] == "degraded" and dropped > 0
    assert len(stored) < CALLS <= len(stored) + dropped  # each call stored or counted
    assert any("spans dropped so far" in message for message in warned), warned


def test_healthz_names_the_dead_letter_file_of_unstorable_rows(tmp_path: Path) -> None:
    with tracecard_for({}, tmp_path) as server:
        store = runtime_of(server).store
        bad = {"trace_id": None, "span_id": "00000000000000aa", "name": "x", "attributes": {}}
        assert store.insert_spans([{**bad, "start_time_unix_nano": 1}]) == 0
        health = httpx.get(f"{server.url}/healthz").json()
    recording = health["recording"]
    assert health["status"] == "degraded"
    assert recording["dropped"] == 1 and recording["dead_lettered"] == 1
    assert recording["dead_letter_full"] == 0
    path = Path(recording["dead_letter_file"])
    assert path == tmp_path / "tracecard.db.spool" / "dead-letter.jsonl"  # beside the spool
    assert '"00000000000000aa"' in path.read_text()


def test_healthz_says_whether_the_spool_fsyncs(tmp_path: Path) -> None:
    """As durable as the database: not on SQLite unless asked (docs/configuration.md)."""
    with tracecard_for({}, tmp_path / "default") as server:
        assert httpx.get(f"{server.url}/healthz").json()["recording"]["spool_fsync"] is False
    with tracecard_for({}, tmp_path / "asked", recording={"spool_fsync": True}) as server:
        assert httpx.get(f"{server.url}/healthz").json()["recording"]["spool_fsync"] is True
    with tracecard_for({}, tmp_path / "none", recording={"spool": False}) as server:
        assert httpx.get(f"{server.url}/healthz").json()["recording"]["spool_fsync"] is None
