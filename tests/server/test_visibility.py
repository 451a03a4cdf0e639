"""server/proxy/visibility.py on its own: which traffic hides what, the rewritten answers, and
the suite check's findings about verifier-only tools (the real servers: test_verifier_tools.py).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tracecard.scorers import parse_suite
from tracecard.scorers.tool_check import check_tools
from tracecard.server.proxy.visibility import (
    filter_body,
    filter_reply,
    filtering_sse,
    hidden_call,
    hidden_for,
)
from tracecard.server.settings import UpstreamSettings
from tracecard.traces import semconv as sc

HIDDEN = frozenset({"_state"})
LISTED = {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {"tools": [{"name": "cd"}, {"name": "_state"}, {"name": "ls"}], "nextCursor": "c"},
}


def test_only_agent_traffic_on_an_upstream_that_names_them_hides_tools() -> None:
    upstream = UpstreamSettings(command=["x"], verifier_tools=["_state"])
    assert hidden_for(upstream, sc.ROLE_AGENT) == HIDDEN
    assert hidden_for(upstream, sc.ROLE_VERIFIER) == frozenset()
    assert hidden_for(UpstreamSettings(command=["x"]), sc.ROLE_AGENT) == frozenset()
    assert hidden_for(None, sc.ROLE_AGENT) == frozenset()


def test_bad_verifier_tools_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="needs an MCP upstream"):
        UpstreamSettings(url="http://h", kind="http", verifier_tools=["x"])
    with pytest.raises(ValueError, match="empty tool name"):
        UpstreamSettings(command=["x"], verifier_tools=[" "])


def test_a_call_is_hidden_by_its_tool_name_only() -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "_state"}}
    assert hidden_call(call, HIDDEN) == "_state"
    assert hidden_call({**call, "params": {"name": "cd"}}, HIDDEN) is None
    assert hidden_call({**call, "method": "prompts/get"}, HIDDEN) is None
    assert hidden_call({**call, "params": "junk"}, HIDDEN) is None
    assert hidden_call(call, frozenset()) is None


def test_a_list_answer_loses_the_hidden_tools_and_keeps_the_rest() -> None:
    shown = filter_reply(LISTED, HIDDEN)
    assert [t["name"] for t in shown["result"]["tools"]] == ["cd", "ls"]
    assert shown["result"]["nextCursor"] == "c" and shown["id"] == 7
    assert [t["name"] for t in LISTED["result"]["tools"]] == ["cd", "_state", "ls"]  # a copy
    error = {"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "m"}}
    assert filter_reply(error, HIDDEN) is error


def test_a_body_is_rewritten_only_for_the_list_requests_it_answers() -> None:
    body = orjson.dumps(LISTED)
    shown = filter_body(body, ["7"], HIDDEN)
    assert shown is not None and b"_state" not in shown
    assert filter_body(body, ["8"], HIDDEN) is None  # another request's answer: as sent
    batch = orjson.dumps([LISTED, {**LISTED, "id": 8}])
    rewritten = orjson.loads(filter_body(batch, ["8"], HIDDEN) or b"")
    assert [len(m["result"]["tools"]) for m in rewritten] == [3, 2]
    assert filter_body(b"not json", ["7"], HIDDEN) is None


async def test_an_sse_answer_is_reframed_with_the_list_filtered() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    filtered = filtering_sse(send, ["7"], HIDDEN)
    await filtered({"type": "http.response.start", "status": 200, "headers": []})
    data = orjson.dumps(LISTED)
    progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'
    raw = b"id: p\r\ndata:\r\n\r\n: comment\r\n\r\ndata: " + progress + b"\r\n\r\nid: 2\r\ndata: "
    await filtered({"type": "http.response.body", "body": raw, "more_body": True})
    await filtered({"type": "http.response.body", "body": data[:20], "more_body": True})
    await filtered({"type": "http.response.body", "body": data[20:] + b"\r\n\r\n"})
    assert sent[0]["type"] == "http.response.start"
    stream = b"".join(m["body"] for m in sent[1:])
    assert stream.startswith(b"id: p\r\n\r\ndata: " + progress + b"\r\n\r\n")
    last = stream.split(b"\r\n\r\n")[-2]
    assert last.startswith(b"id: 2\r\ndata: ")
    message = orjson.loads(last.split(b"data: ", 1)[1])
    assert [t["name"] for t in message["result"]["tools"]] == ["cd", "ls"]
    assert sent[-1].get("more_body") is None  # the end of the body still ends it


SUITE = """
schema_version = 1
name = "s"
[[tasks]]
id = "t"
instruction = "x"
upstreams = ["bfcl"]
tools = ["{tool}"]
[[tasks.invocation.calls]]
tool = "{call}"
[[tasks.outcome.probes]]
id = "state"
upstream = "bfcl"
tool = "_state"
[[tasks.outcome.predicates]]
probe = "state"
op = "exists"
"""


def test_the_suite_check_lets_probes_use_verifier_tools_and_no_one_else() -> None:
    listings = {"bfcl": ["cd", "ls", "_state"]}
    good = parse_suite(SUITE.format(tool="cd", call="ls"), "toml")
    assert check_tools(good, listings, verifier_only={"bfcl": ["_state"]}) == []
    bad = parse_suite(SUITE.format(tool="_state", call="_state"), "toml")
    findings = check_tools(bad, listings, "s.toml", verifier_only={"bfcl": ["_state"]})
    assert [f.level for f in findings] == ["error", "error"]
    assert "tools[0]: '_state' is a verifier-only tool of 'bfcl'" in findings[0].message
    assert "invocation.calls[0].tool" in findings[1].message
    typo = check_tools(good, listings, verifier_only={"bfcl": ["_stat"]})
    assert [f.level for f in typo] == ["warning"]
    assert "verifier_tools names '_stat', which its tools/list does not have" in typo[0].message
