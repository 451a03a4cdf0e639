"""An MCP server (the official SDK, stdio) exposing one BFCL entry as tools.

    python -m tracecard.server.bfcl.mcp_server ENTRY_ID

Multi-turn entries: the methods of the entry's environment classes (BFCL's function docs, minus the
entry's excluded functions), executed on fresh instances in the entry's initial configuration, plus
`_bfcl_state`: the state BFCL's checker compares (every public attribute of each class, as
`structuredContent`), for the suite's per-turn probes. The generated upstream configuration names it
in `verifier_tools`, so tracecard hides it from the agent's tools/list and refuses the agent's calls
of it (docs/proxy.md). Multi-turn entries also have `_bfcl_turn`, tracecard's turn notice (the
upstream's `turn_tool`, verifier-only): a `multi_turn_miss_func` entry's held-back functions stay
out of `tools/list` until the notice of the turn that reveals them, which then sends
`notifications/tools/list_changed` (server/bfcl/miss_func.py); a call of one before that is
executed, as BFCL's executor executes it. Single-turn entries: the entry's functions, each call
answered with a neutral result (BFCL judges those calls by their arguments alone). Run as a
`per_run` upstream, each run gets its own process, so trials never share state.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

from tracecard.server.bfcl.env import Environment, entries, function_docs
from tracecard.server.bfcl.miss_func import TURN_TOOL, held_back, hidden_at

NEUTRAL_RESULT = "ok"
STATE_TOOL = "_bfcl_state"  # verifier-only: the environment's state, for the state probes
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


def _state_tool() -> types.Tool:
    return types.Tool(
        name=STATE_TOOL,
        description="tracecard's probe: the state of every environment class (verifier-only)",
        input_schema={"type": "object", "properties": {}},
    )


def _turn_tool() -> types.Tool:
    return types.Tool(
        name=TURN_TOOL,
        description="tracecard's turn notice: the run entered this turn (verifier-only)",
        input_schema={
            "type": "object",
            "properties": {"turn": {"type": "integer", "minimum": 0}},
            "required": ["turn"],
        },
    )


def build_server(entry: dict[str, Any]) -> Server[Any]:
    """The MCP server of one entry (a fresh environment; its state tool and turn notice for
    multi-turn ones)."""
    docs = tool_docs(entry)
    tools = [_tool(doc) for doc in docs]
    environment = Environment(entry) if "involved_classes" in entry else None
    if environment is not None:
        tools += [_state_tool(), _turn_tool()]
    turn = 0  # the turn the run is in, as tracecard's last notice said

    def hidden() -> set[str]:
        return hidden_at(entry, turn)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        held = hidden()
        return types.ListToolsResult(tools=[t for t in tools if t.name not in held])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal turn
        if environment is not None and params.name == STATE_TOOL:
            state = environment.state()
            # structured content only: a JSON copy in the text would double what the spans store
            summary = f"state of {', '.join(state)}"
            return types.CallToolResult(
                content=[types.TextContent(text=summary)], structured_content=state
            )
        if environment is not None and params.name == TURN_TOOL:
            given = (params.arguments or {}).get("turn")
            if not isinstance(given, int) or isinstance(given, bool) or given < 0:
                text = f"turn must be a non-negative integer, got {given!r}"
                return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
            before, turn = hidden(), max(turn, given)
            revealed = sorted(before - hidden())
            if revealed:  # before the answer: the agent's stream has it before the turn's message
                await ctx.session.send_tool_list_changed()
            text = f"turn {turn}" + (f"; revealed {', '.join(revealed)}" if revealed else "")
            return types.CallToolResult(content=[types.TextContent(text=text)])
        # a held-back function is executed all the same, as BFCL's executor executes any call
        # the model makes (its checker judges it; one entry's ground truth even calls one early)
        names = {doc["name"] for doc in docs}
        if params.name not in names:
            text, error = f"Error during execution: unknown function {params.name!r}", True
        elif environment is None:
            text, error = NEUTRAL_RESULT, False
        else:
            text = environment.execute(params.name, dict(params.arguments or {}))
            error = False  # BFCL hands error text back as the result; so does this server
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)

    return Server(f"bfcl-{entry['id']}", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(server: Server[Any], changes_tools: bool) -> None:
    options = server.create_initialization_options(NotificationOptions(tools_changed=changes_tools))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    entry = find_entry(args[0])
    anyio.run(_serve, build_server(entry), bool(held_back(entry)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
