"""A real MCP server whose tools ask the client for input (the official SDK's `MCPServer`).

On the 2026-07-28 protocol the SDK asks through multi round-trip requests (SEP-2322): the tool
call is answered `input_required` with the question, and the client retries it with the answer.
`deploy` asks which environment (elicitation), then for a release note (sampling, which depends
on the answer): three rounds on the wire. `summarize` asks for sampling only: two rounds. On the
session protocol (2025-11-25) the same tools send `elicitation/create` and
`sampling/createMessage` requests mid-call instead.

Run: python tests/servers/mrtr_server.py PORT      (streamable HTTP, both protocol generations)
     python tests/servers/mrtr_server.py stdio
"""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.mcpserver import Elicit, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("tracecard-mrtr-tools")


class Target(BaseModel):
    environment: str


def ask_environment(service: str, version: str) -> Elicit[Target]:
    return Elicit(f"Deploy {service} {version} to which environment?", Target)


def _sampled_text(result: CreateMessageResult) -> str:
    content = result.content
    return content.text if isinstance(content, TextContent) else str(content)


def ask_release_note(service: str, target: Annotated[Target, Resolve(ask_environment)]) -> Sample:
    prompt = f"One line of release notes for {service} on {target.environment}."
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=40,
    )


def ask_summary(topic: str) -> Sample:
    prompt = f"Summarize {topic} in one sentence."
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=40,
    )


@server.tool()
def deploy(
    service: str,
    version: str,
    target: Annotated[Target, Resolve(ask_environment)],
    note: Annotated[CreateMessageResult, Resolve(ask_release_note)],
) -> str:
    """Deploy a service version; asks where (elicitation), then for a release note (sampling)."""
    return f"deployed {service} {version} to {target.environment}: {_sampled_text(note)}"


@server.tool()
def summarize(topic: str, summary: Annotated[CreateMessageResult, Resolve(ask_summary)]) -> str:
    """A summary of the topic, written by the client's model (sampling)."""
    return f"summary of {topic}: {_sampled_text(summary)}"


@server.tool()
def status(service: str) -> str:
    """An ordinary tool: answers at once."""
    return f"{service} is up"


def main() -> None:
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))


if __name__ == "__main__":
    main()
