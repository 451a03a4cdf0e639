"""What a stdio process exchanges with its callers: errors, waiting requests, constants."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tracecard.server.recording.recorder import Exchange, PendingCall
from tracecard.traces import semconv

HANDSHAKE_VERSION = "2025-11-25"  # the newest session-protocol version tracecard speaks
CODE_UPSTREAM = -32000  # JSON-RPC error code for "the upstream failed" (same as the HTTP proxy)
STDERR_TAIL = 4000  # bytes of stderr kept for error messages and crash spans
LINE_LIMIT = 64 * 1024 * 1024  # longest stdout line accepted
STDERR_ATTRIBUTE = "tracecard.upstream.stderr_tail"
EXIT_CODE_ATTRIBUTE = "tracecard.upstream.exit_code"
DIRECTION_ATTRIBUTE = "tracecard.mcp.direction"

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
