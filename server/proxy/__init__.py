"""The recording proxy: MCP streamable HTTP and plain HTTP tools, mounted in front of Litestar."""

from __future__ import annotations

from tracecard.server.proxy.lifespan import proxy_lifespan
from tracecard.server.proxy.routing import ProxyRouter, match
from tracecard.server.proxy.state import ProxyState

__all__ = ["ProxyRouter", "ProxyState", "match", "proxy_lifespan"]
