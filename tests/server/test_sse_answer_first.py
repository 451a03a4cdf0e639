"""An SSE answer reaches the agent's socket before its span is closed (#24 item 2): the server
gathers what one loop turn writes into one write, so recording an event's answers inside that
turn delayed the event's bytes by the recording's cost. The spans are closed in a callback after
the turn's write instead, and still hold the answer.

Served as `tracecard serve` serves (uvicorn with the one-write protocol, the guard, the MCP
proxy, the recorder) in a fresh interpreter, in front of the SDK's test server with sessions +
SSE; the client is `http.client`. Two hooks watch the order: the writer notes when bytes holding
an event went to the socket, the recorder when it closes a `tools/call` span."""

from __future__ import annotations

import http.client
import json
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import text

from tests.support.processes import fresh_interpreter, mcp_tool_server

CALLS = 20
LEGACY = "2025-11-25"


def _post(
    connection: http.client.HTTPConnection, message: dict[str, Any], headers: dict[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    connection.request("POST", "/mcp/tools", body=json.dumps(message), headers=headers)
    answer = connection.getresponse()
    return answer, answer.read()


def measure(upstream: str, folder: Path) -> dict[str, Any]:
    from tests.support.proxy import rpc
    from tests.support.tracecard import running_tracecard
    from tracecard.server import http_protocol
    from tracecard.server.recording.recorder import Recorder
    from tracecard.server.settings import load_settings
    from tracecard.traces.store import Store

    seen: dict[str, Any] = {"event_held": False, "event_sent": False, "at_finish": []}
    write, flush = http_protocol._OneWrite.write, http_protocol._OneWrite._flush

    def sent(writer: Any) -> None:
        if seen["event_held"] and writer._held is None:  # everything given went to the socket
            seen["event_held"], seen["event_sent"] = False, True

    def watched_write(self: Any, data: bytes) -> None:
        if b"event: message" in data:  # a new event: not sent until the writer lets it go
            seen["event_held"], seen["event_sent"] = True, False
        write(self, data)
        sent(self)

    def watched_flush(self: Any) -> None:
        flush(self)
        sent(self)

    finish = Recorder.finish

    def watched_finish(self: Any, pending: Any, response: Any) -> None:
        if pending.method == "tools/call":
            seen["at_finish"].append(seen["event_sent"])
            seen["event_sent"] = False
        finish(self, pending, response)

    http_protocol._OneWrite.write = watched_write  # type: ignore[method-assign]
    http_protocol._OneWrite._flush = watched_flush  # type: ignore[method-assign]
    Recorder.finish = watched_finish  # type: ignore[method-assign]

    db = f"sqlite:///{folder / 'tracecard.db'}"
    settings = load_settings(None, environ={}, db=db, upstreams={"tools": {"url": upstream}})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    answers = []
    with running_tracecard(settings) as served:
        port = int(served.url.rsplit(":", 1)[1])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        hello = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "test"}}
        answer, _ = _post(connection, rpc("initialize", hello, id=0), headers)
        headers |= {"Mcp-Session-Id": answer.headers["mcp-session-id"]}
        headers |= {"MCP-Protocol-Version": LEGACY}
        _post(connection, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        for i in range(1, CALLS + 1):
            params = {"name": "echo", "arguments": {"text": f"hi {i}"}}
            call = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
            answer, body = _post(connection, call, headers)
            assert answer.headers["content-type"].startswith("text/event-stream"), body
            answers.append(body)
        connection.close()
    store = Store(db)
    try:
        with store.engine.connect() as rows:
            query = text("select attributes from spans where name = 'tools/call echo'")
            stored = [json.loads(row[0]) for row in rows.execute(query)]
    finally:
        store.dispose()
    results = [attributes.get("gen_ai.tool.call.result", "") for attributes in stored]
    return {
        "answered": sum(f"hi {i + 1}".encode() in a for i, a in enumerate(answers)),
        "at_finish": seen["at_finish"],
        "results": sorted(results),
    }


def test_an_sse_answer_is_sent_before_its_span_is_closed(tmp_path: Path) -> None:
    with mcp_tool_server() as upstream:  # sessions + SSE
        found = fresh_interpreter(__file__, upstream, str(tmp_path))
    assert found["answered"] == CALLS  # every call came back as itself
    # each tools/call span was closed after the event holding its answer left for the socket
    assert found["at_finish"] == [True] * CALLS
    # and still holds that answer
    assert len(found["results"]) == CALLS
    assert all("hi " in result for result in found["results"])


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], Path(sys.argv[2]))))
