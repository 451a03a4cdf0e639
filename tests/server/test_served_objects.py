"""A served request leaves no reference cycle (#24 item 2): calls through tracecard as it is
served (uvicorn with tracecard's one-write protocol, the guard, the MCP proxy, the recorder)
are freed by reference counting, none by the garbage collector.

A cycle per request is CPU every call pays: the collector scans and frees it later. The
one-write protocol once held each request's uvicorn cycle strongly from the writer the cycle
holds as its transport: ~17 objects a request (the cycle, its scope and headers, its event,
the writer) that only a collection freed, 40-60 ms a collection of 45,000 objects in `tracecard
serve`, ~19 us of CPU a call. The in-process recording test (test_recording_objects) does not
go through the HTTP server, so it could not see that.

The count is taken in a fresh interpreter with the collector off: the server runs in a thread
of it, the client is `http.client` on one keep-alive connection in the main thread."""

from __future__ import annotations

import gc
import http.client
import json
import sys
from pathlib import Path

from tests.support.processes import fresh_interpreter, mcp_tool_server

CALLS = 2_000

MODERN = {  # the stateless protocol: no session, the method named in headers too
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


def _call(connection: http.client.HTTPConnection, call_id: int) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "echo", "arguments": {"text": f"hi {call_id}"}, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params}
    connection.request("POST", "/mcp/tools", body=json.dumps(message), headers=MODERN)
    answer = connection.getresponse()
    body = answer.read()
    assert answer.status == 200, body
    return body


def measure(upstream: str, folder: Path) -> dict[str, object]:
    from tests.support.tracecard import running_tracecard
    from tracecard.server.settings import load_settings

    db = f"sqlite:///{folder / 'tracecard.db'}"
    settings = load_settings(None, environ={}, db=db, upstreams={"tools": {"url": upstream}})
    with running_tracecard(settings) as served:
        port = int(served.url.rsplit(":", 1)[1])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(300):  # warm: connections, caches, lazy imports, the spool segment
            _call(connection, i)
        gc.collect()
        gc.disable()
        try:
            gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept, to be named
            gc.collect()
            gc.garbage.clear()
            answers = [_call(connection, 1_000 + i) for i in range(CALLS)]
            in_cycles = gc.collect()
            kinds: dict[str, int] = {}
            for found in gc.garbage:
                name = type(found).__qualname__
                kinds[name] = kinds.get(name, 0) + 1
            gc.garbage.clear()
            gc.set_debug(0)
        finally:
            gc.enable()
        connection.close()
    answered = sum(f"hi {1_000 + i}".encode() in a for i, a in enumerate(answers))
    top = dict(sorted(kinds.items(), key=lambda item: -item[1])[:8])
    return {"answered": answered, "in_cycles": in_cycles, "kinds": top}


def test_served_calls_leave_no_reference_cycles(tmp_path: Path) -> None:
    with mcp_tool_server("--stateless", "--json") as upstream:
        found = fresh_interpreter(__file__, upstream, str(tmp_path))
    assert found["answered"] == CALLS  # every call went through and came back as itself
    # bounded, not per request: one cycle a request would be >= CALLS objects
    assert found["in_cycles"] < CALLS // 10, found


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], Path(sys.argv[2]))))
