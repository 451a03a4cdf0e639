"""Serving with uvicorn: the options every tracecard server uses, and a graceful drain.

On SIGTERM (or `should_exit`) uvicorn stops accepting connections and waits for the requests
in flight for `timeout_graceful_shutdown` seconds, then cancels them. tracecard's grace is the
longest upstream timeout plus a margin, so every call in flight ends on its own terms: answered,
or answered with its timeout's JSON-RPC error, and recorded either way. Streams that would never
end by themselves (the MCP GET stream) are told to close first, through `Runtime.draining`.
"""

from __future__ import annotations

import socket
from typing import Any

import uvicorn

from tracecard.server.settings import Settings

GRACE_MARGIN_S = 5.0  # past the longest upstream timeout: time to answer, record and flush


def grace_seconds(settings: Settings) -> float:
    """How long a shutdown waits for calls in flight: the longest upstream timeout and a margin."""
    timeouts = [settings.upstream_timeout_s]
    timeouts += [u.timeout_s for u in settings.upstreams.values() if u.timeout_s]
    return max(timeouts) + GRACE_MARGIN_S


def server_options(settings: Settings) -> dict[str, Any]:
    """uvicorn options shared by `tracecard serve`, the embedded server and the test helpers."""
    from tracecard.server.http_protocol import OneWriteHttpTools

    return {
        "http": OneWriteHttpTools,  # httptools; a whole answer's head and body in one write
        "lifespan": "on",
        "access_log": False,
        "server_header": False,  # a proxied answer keeps the upstream's own `server`
        "timeout_graceful_shutdown": grace_seconds(settings),
        # uvicorn believes X-Forwarded-* from 127.0.0.1 by default, in a middleware on every
        # request: only when a reverse proxy is configured here
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": list(settings.trusted_proxies) or None,
    }


def _draining_events(app: Any) -> list[Any]:
    """The `Runtime.draining` event of every tracecard app wrapped in `app` (guard, router)."""
    found = []
    while app is not None:
        runtime = getattr(getattr(app, "state", None), "runtime", None)
        if runtime is not None:
            found.append(runtime.draining)
        app = getattr(app, "app", None)
    return found


class TracecardServer(uvicorn.Server):
    """uvicorn's server that tells the app it is draining before it waits for requests."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for draining in _draining_events(self.config.app):
            draining.set()
        await super().shutdown(sockets)
