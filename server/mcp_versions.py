"""The MCP SDK's protocol version registry (`mcp_types.version`), read when first asked.

`from mcp_types.version import ...` runs the `mcp_types` package's `__init__`, which builds
every wire model of both protocol revisions: about 0.3 s of CPU at each tracecard start, paid
by every worker and replica whether or not it ever proxies MCP. The names here load it on first
use (a stateless MCP request, a fault or replay answer) and keep the SDK's values."""

from __future__ import annotations

import functools

__all__ = ["INVALID_PARAMS", "modern_versions"]

INVALID_PARAMS = -32602  # JSON-RPC 2.0: invalid method parameters (mcp_types.INVALID_PARAMS)


@functools.cache
def modern_versions() -> tuple[str, ...]:
    """The stateless protocol's versions (`mcp_types.version.MODERN_PROTOCOL_VERSIONS`), oldest
    first."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return tuple(MODERN_PROTOCOL_VERSIONS)
