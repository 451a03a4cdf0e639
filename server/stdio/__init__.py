"""Stdio upstreams: MCP servers tracecard starts as child processes and serves over HTTP.

Public surface: `stdio_lifespan(runtime)` for the app factory, `StdioBridge` (the ASGI handler
the proxy calls as `runtime.stdio(scope, receive, send, upstream, run_or_None)`), `StdioUpstreams`
(process lifecycles), `StdioProcess` and `UpstreamError`.
"""

from __future__ import annotations

from tracecard.server.stdio.bridge import StdioBridge
from tracecard.server.stdio.messages import UpstreamError
from tracecard.server.stdio.pool import StdioUpstreams
from tracecard.server.stdio.process import StdioProcess
from tracecard.server.stdio.service import stdio_lifespan

__all__ = ["StdioBridge", "StdioProcess", "StdioUpstreams", "UpstreamError", "stdio_lifespan"]
