"""A live MCP session behind a replayed one, opened when a request misses (`on_miss = "live"`).

Under replay the agent's `initialize` is answered from the recording with a session id of
tracecard's own (`replay-…`), which the upstream never issued. The first request that goes live
opens a real session with the agent's recorded handshake; its requests then carry the real id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from tracecard.server.proxy.forward import open_upstream, upstream_url
from tracecard.server.proxy.relay import STREAM_ERRORS, TIMEOUT_ERRORS
from tracecard.server.replay.index import RunReplay

if TYPE_CHECKING:
    from tracecard.server.proxy.forward import RequestHeaders
    from tracecard.server.proxy.state import ProxyState, Upstream

REPLAY_SESSION_PREFIX = "replay-"
_HANDSHAKE_ID = "tracecard-replay-initialize"


async def _post(
    state: ProxyState, upstream: Upstream, forward: list[tuple[str, str]], message: dict[str, Any]
) -> tuple[int, str | None]:
    url = upstream_url(upstream, b"")
    body = orjson.dumps(message)
    response = await open_upstream(state.client, "POST", url, forward, body, upstream.timeout_s)
    try:
        async for _chunk in response.aiter_raw():
            pass
    finally:
        await response.aclose()
    return response.status_code, response.headers.get("mcp-session-id")


async def go_live(
    state: ProxyState, replay: RunReplay, upstream_name: str, headers: RequestHeaders
) -> None:
    """Point this request at a real upstream session (opened once per replayed session)."""
    synthetic = headers.session_id
    if synthetic is None or not synthetic.startswith(REPLAY_SESSION_PREFIX):
        return
    upstream = state.upstreams[upstream_name]
    real = replay.live_sessions.get(synthetic)
    base = [(n, v) for n, v in headers.forward if n.lower() != "mcp-session-id"]
    if upstream.extra_headers:
        base = base + upstream.extra_headers
    if real is None:
        params = replay.handshakes.get(synthetic) or {}
        params = {
            "protocolVersion": params.get("protocolVersion") or "2025-11-25",
            "capabilities": params.get("capabilities") or {},
            "clientInfo": params.get("clientInfo") or {"name": "tracecard-replay", "version": "1"},
        }
        hello = {"jsonrpc": "2.0", "id": _HANDSHAKE_ID, "method": "initialize", "params": params}
        try:
            _status, real = await _post(state, upstream, base, hello)
            if real is not None:
                done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await _post(state, upstream, [*base, ("mcp-session-id", real)], done)
        except (*TIMEOUT_ERRORS, *STREAM_ERRORS):
            return  # the forward that follows fails the same way, and says so
        if real is None:
            return  # a stateless upstream: no session to carry
        replay.live_sessions[synthetic] = real
    headers.forward = [
        (n, real if n.lower() == "mcp-session-id" else v) for n, v in headers.forward
    ]
