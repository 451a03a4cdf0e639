"""What a stdio process exchanges with its callers: errors, waiting requests, constants."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tracecard.server.mcp_versions import modern_versions
from tracecard.server.recording.recorder import Exchange, PendingCall
from tracecard.traces import semconv

HANDSHAKE_VERSION = "2025-11-25"  # the newest session-protocol version tracecard speaks
CODE_UPSTREAM = -32000  # JSON-RPC error code for "the upstream failed" (same as the HTTP proxy)
STDERR_TAIL = 4000  # bytes of stderr kept for error messages and crash spans
LINE_LIMIT = 64 * 1024 * 1024  # longest stdout line accepted
STDERR_ATTRIBUTE = "tracecard.upstream.stderr_tail"
EXIT_CODE_ATTRIBUTE = "tracecard.upstream.exit_code"
DIRECTION_ATTRIBUTE = "tracecard.mcp.direction"
VERSION_HEADER = "mcp-protocol-version"
MODERN_META_PREFIX = "io.modelcontextprotocol/"  # the 2026-07-28 per-request `_meta` keys

# Where request-scoped server messages (progress, server->client requests) go: the HTTP side.
Sink = Callable[[dict[str, Any]], Awaitable[bool]]


class UpstreamError(Exception):
    """The upstream could not answer; `error_type` is the span's `error.type`."""

    def __init__(self, message: str, error_type: str = semconv.ERR_UNAVAILABLE) -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass
class _Waiter:
    future: asyncio.Future[dict[str, Any]]
    client_id: Any
    pending: PendingCall | None
    sink: Sink | None = None
    progress_token: Any = None
    handshake: bool = False  # banners on stdout at start are tolerated
    exchange: Exchange | None = None


@dataclass
class _ServerRequest:
    server_id: Any
    pending: PendingCall


def strip_modern_meta(message: dict[str, Any]) -> dict[str, Any]:
    """The request without the 2026-07-28 per-request `_meta` envelope (for a session server)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(meta, dict):
        return message
    kept = {k: v for k, v in meta.items() if not k.startswith(MODERN_META_PREFIX)}
    params = {k: v for k, v in params.items() if k != "_meta"}
    if kept:
        params["_meta"] = kept
    return dict(message, params=params)


def is_modern(message: Any, headers: dict[str, str]) -> bool:
    """Whether a request speaks the stateless protocol (2026-07-28)."""
    if headers.get(VERSION_HEADER) in modern_versions():
        return True
    if not isinstance(message, dict):
        return False
    if message.get("method") == "server/discover":
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and MODERN_META_PREFIX + "protocolVersion" in meta
