"""tracecard's own tool calls to a stdio upstream, made in process (no HTTP round trip).

Used for turn notices (server/evaluation/turn_notice.py): the call goes through the bridge's
`StdioCalls.forward` exactly as a probe's call that came over HTTP with the verifier key would
(recorded as a `verifier` span in the run, verifier-only tools visible), minus the MCP session
over tracecard's own proxy that a probe opens (`server/discover`, then the call).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from tracecard.server.recording.recorder import VERIFIER_HEADER
from tracecard.server.runs.registry import RunInfo

if TYPE_CHECKING:
    from tracecard.server.stdio.bridge import StdioBridge

__all__ = ["VerifierCallFailed", "call_tool"]

_ids = itertools.count(1)


class VerifierCallFailed(RuntimeError):
    """The upstream answered tracecard's call with a JSON-RPC error (its message)."""


async def call_tool(
    bridge: StdioBridge,
    upstream: str,
    run: RunInfo,
    tool: str,
    arguments: dict[str, Any],
) -> dict[str, Any]:
    """Call `tool` of stdio upstream `upstream` in `run`'s process as tracecard's verifier; the
    `CallToolResult` as a dict (raises `VerifierCallFailed` on a JSON-RPC error)."""
    headers = {VERIFIER_HEADER.lower(): bridge.runtime.verifier_key}  # as the bridge reads them
    exchange = bridge.calls.exchange(upstream, run, headers)
    message = {
        "jsonrpc": "2.0",
        "id": f"tracecard-{next(_ids)}",
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    reply = await bridge.calls.forward(upstream, message, exchange)
    result = reply.get("result")
    if not isinstance(result, dict):
        error = reply.get("error")
        said = error.get("message") if isinstance(error, dict) else None
        raise VerifierCallFailed(str(said or f"no result from {upstream!r}"))
    return result
