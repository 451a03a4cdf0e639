"""An MCP server (the official SDK, stdio) exposing one BFCL entry as tools.

    python -m tracecard.server.bfcl.mcp_server ENTRY_ID STATE_FILE

Multi-turn entries: the methods of the entry's environment classes (BFCL's function docs, minus
the entry's excluded functions), executed on fresh instances in the entry's initial
configuration; after every call the state BFCL's checker compares is written to STATE_FILE
(atomically), which the suite's per-turn `file` probes read. The state is not a tool: the agent
cannot see or call it. Single-turn entries: the entry's functions, each call answered with a
neutral result (BFCL judges those calls by their arguments alone).
Run as a `per_run` upstream, each run gets its own process, so trials never share state.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from tracecard.server.bfcl.env import Environment, entries, function_docs

NEUTRAL_RESULT = "ok"
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def json_schema(schema: Any) -> Any:
    """BFCL's parameter schema (`dict`, `float`, `tuple`, `any`) as JSON Schema."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            mapped = _TYPES.get(value, value)
            if mapped is not None:
                out["type"] = mapped
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = json_schema(value)
        elif key not in ("optional",):
            out[key] = value
    return out


def find_entry(entry_id: str) -> dict[str, Any]:
    """The question of one BFCL entry by id (`multi_turn_base_0`, `simple_python_3`…)."""
    category = entry_id.rsplit("_", 1)[0]
    for entry in entries(category):
        if entry["id"] == entry_id:
            return entry
    raise KeyError(f"no BFCL entry {entry_id!r} in category {category!r}")


def tool_docs(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The functions an agent is shown for the entry (BFCL's docs)."""
    if "function" in entry:
        return list(entry["function"])
    excluded = set(entry.get("excluded_function", []))
    docs = [doc for name in entry["involved_classes"] for doc in function_docs(name)]
    return [doc for doc in docs if doc["name"] not in excluded]


def _tool(doc: dict[str, Any]) -> types.Tool:
    schema = json_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    schema["type"] = "object"
    return types.Tool(name=doc["name"], description=doc.get("description", ""), input_schema=schema)


def _write_state(path: Path, state: dict[str, Any]) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(state), encoding="utf-8")
    os.replace(temporary, path)


def build_server(entry: dict[str, Any], state_file: Path | None) -> Server[Any]:
    """The MCP server of one entry (fresh environment, state written after every call)."""
    docs = tool_docs(entry)
    tools = [_tool(doc) for doc in docs]
    names = {doc["name"] for doc in docs}
    environment = Environment(entry) if "involved_classes" in entry else None
    if environment is not None and state_file is not None:
        _write_state(state_file, environment.state())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            text, error = f"Error during execution: unknown function {params.name!r}", True
        elif environment is None:
            text, error = NEUTRAL_RESULT, False
        else:
            text = environment.execute(params.name, dict(params.arguments or {}))
            error = False  # BFCL hands error text back as the result; so does this server
            if state_file is not None:
                _write_state(state_file, environment.state())
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)

    return Server(f"bfcl-{entry['id']}", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    entry = find_entry(args[0])
    state_file = Path(args[1]) if len(args) == 2 else None
    anyio.run(_serve, build_server(entry, state_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
