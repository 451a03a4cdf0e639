"""What each fault kind does to an answer: pure functions on JSON-RPC replies and HTTP bodies.

The agent-visible result of each kind is tabled in docs/replay.md ("Fault plans").
"""

from __future__ import annotations

from typing import Any

import orjson

from tracecard.server.faults.plan import FaultRule

CODE_UPSTREAM = -32000


def replacement(rule: FaultRule, request_id: Any, upstream: str) -> dict[str, Any] | None:
    """The JSON-RPC reply that replaces the real one (None: the kind changes the real one)."""
    if rule.kind == "timeout":
        text = f"tracecard: upstream {upstream!r} did not answer in time (injected fault)"
        error = {"code": CODE_UPSTREAM, "message": text, "data": {"reason": "timeout"}}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    if rule.kind == "jsonrpc_error":
        error = {"code": rule.code, "message": rule.message}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    if rule.kind == "tool_error":
        result = {"content": [{"type": "text", "text": rule.message}], "isError": True}
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    return None


def _values(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list):
        return node
    return [node]


def changed_result(rule: FaultRule, result: Any, hits: Any) -> Any:
    """A `tools/call` or `tools/list` result changed by `truncate`, `corrupt`, `drop_tool` or
    `schema_change`; `hits(tool_name)` says which tools a listing rule changes."""
    if not isinstance(result, dict):
        return result
    if rule.kind == "truncate":
        content = [
            {**item, "text": str(item.get("text", ""))[: rule.keep]}
            if isinstance(item, dict) and item.get("type") == "text"
            else item
            for item in result.get("content") or []
        ]
        return {k: v for k, v in result.items() if k != "structuredContent"} | {"content": content}
    if rule.kind == "corrupt":
        original = result.get("structuredContent")
        if original is None:
            texts = [i.get("text") for i in result.get("content") or [] if isinstance(i, dict)]
            original = texts
        wrong = {"unexpected": _values(original)}
        text = orjson.dumps(wrong).decode()
        return {**result, "structuredContent": wrong, "content": [{"type": "text", "text": text}]}
    tools = result.get("tools")
    if not isinstance(tools, list):
        return result
    if rule.kind == "drop_tool":
        kept = [t for t in tools if not (isinstance(t, dict) and hits(str(t.get("name"))))]
        return {**result, "tools": kept}
    if rule.kind == "schema_change":
        return {**result, "tools": [_renamed(t) if _hit(t, hits) else t for t in tools]}
    return result


def _hit(tool: Any, hits: Any) -> bool:
    return isinstance(tool, dict) and bool(hits(str(tool.get("name"))))


def _renamed(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return tool
    properties = schema.get("properties") or {}
    renamed = {
        **schema,
        "properties": {f"{name}_v2": value for name, value in properties.items()},
    }
    if isinstance(schema.get("required"), list):
        renamed["required"] = [f"{name}_v2" for name in schema["required"]]
    return {**tool, "inputSchema": renamed}


def changed_reply(rule: FaultRule, reply: dict[str, Any], hits: Any) -> dict[str, Any]:
    """A JSON-RPC reply with its result changed (errors are left as they are)."""
    if "result" not in reply:
        return reply
    return {**reply, "result": changed_result(rule, reply["result"], hits)}


def changed_body(rule: FaultRule, body: bytes) -> bytes:
    """A plain HTTP body changed by `truncate` (cut) or `corrupt` (wrong shape)."""
    if rule.kind == "truncate":
        return body[: rule.keep]
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = body.decode("utf-8", errors="replace")
    return orjson.dumps({"unexpected": _values(parsed)})
