"""A real MCP server (the official SDK's `MCPServer`, streamable HTTP) used by the tests.

Run: python tests/servers/tool_server.py PORT [--stateless] [--json] [--v2]
     python tests/servers/tool_server.py stdio       (the same tools over stdio)
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("tracecard-test-tools")
NOTES: dict[str, str] = {}
ACCOUNT: dict[str, str] = {}


class Weather(BaseModel):
    city: str
    celsius: float
    conditions: str


if "--v2" in sys.argv:  # a second version of the server: `echo` changed its schema (drift)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def echo(text: str, times: int = 1) -> str:
        """Return the text, repeated."""
        return text * times

else:

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message (the result has isError)."""
    raise ValueError(message)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def weather(city: str) -> Weather:
    """Structured content: the weather in a city."""
    return Weather(city=city, celsius=21.5, conditions="sunny")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def big(size: int) -> str:
    """A text result of `size` bytes."""
    return "x" * size


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report progress `steps` times before answering."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await asyncio.sleep(0.01)
    return f"done {steps}"


@server.tool()
def write_note(key: str, text: str) -> str:
    """Store a note (state the outcome probes can read back)."""
    NOTES[key] = text
    return f"stored {key}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(key: str) -> dict[str, str | None]:
    """Read a note back."""
    return {"key": key, "text": NOTES.get(key)}


@server.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
def delete_all_notes() -> str:
    """Delete every note."""
    NOTES.clear()
    return "deleted"


@server.tool()
def login(user: str, access_token: str) -> str:
    """Open a session; answers with JSON carried as text (secrets inside)."""
    ACCOUNT.update(user=user, access_token=access_token)
    return json.dumps({"user": user, "access_token": access_token, "ok": True})


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def account() -> dict[str, str]:
    """The logged-in account, password and all (a probe reads it)."""
    return {"user": ACCOUNT.get("user", ""), "password": "hunter2-" + ACCOUNT.get("user", "")}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def client_capabilities(ctx: Context) -> str:
    """The capabilities the client declared in its `initialize` (as JSON)."""
    params = ctx.session.client_params
    capabilities = params.capabilities if params is not None else None
    declared = capabilities.model_dump(by_alias=True, exclude_none=True) if capabilities else None
    return json.dumps(declared)


class Name(BaseModel):
    name: str


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the client for a name (an elicitation request to the client); what came back."""
    try:
        answer = await ctx.elicit("Your name?", Name)
    except Exception as exc:  # the client, or tracecard for it, refused the request
        return f"refused: {exc}"
    return f"{answer.action}: {answer.data.name if answer.data else ''}"


async def _run_stdio() -> None:
    """`server.run("stdio")`, declaring the list changes its HTTP mode declares.

    At 2026-07-28 (HTTP, `server/discover`) the SDK derives `listChanged` from serving
    `subscriptions/listen`: true for tools, prompts and resources. Over stdio it speaks the session
    protocol, where `listChanged` comes from `NotificationOptions` (all false by default), so
    through tracecard's stdio bridge the same server would offer no list changes to listen to.
    """
    lowlevel = server._lowlevel_server  # noqa: SLF001 (run_stdio_async takes no options)
    changes = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(
            read_stream, write_stream, lowlevel.create_initialization_options(changes)
        )


def main() -> None:
    if sys.argv[1] == "stdio":
        asyncio.run(_run_stdio())
        return
    port = int(sys.argv[1])
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=port,
        stateless_http="--stateless" in sys.argv,
        json_response="--json" in sys.argv,
    )


if __name__ == "__main__":
    main()
