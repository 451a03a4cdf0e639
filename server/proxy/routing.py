"""A tiny prefix router in front of Litestar: proxy paths never touch the framework.

`/mcp/{upstream}`, `/runs/{run_id}/mcp/{upstream}`, `/http/{upstream}/{path}`,
`/runs/{run_id}/http/{upstream}/{path}` and the model APIs at `/llm/{upstream}/{path}` and
`/runs/{run_id}/llm/{upstream}/{path}` go to the proxy; every other path (the API, the
viewer's `/runs/{id}` pages, the lifespan) goes to Litestar.
"""

from __future__ import annotations

import logging
from typing import Any

from tracecard.server.asgi import BodyTooLarge, ClientGone, Receive, Scope, Send
from tracecard.server.proxy.errors import ProxyError, send_error
from tracecard.server.proxy.state import ProxyState
from tracecard.server.settings import MODEL_KINDS

log = logging.getLogger(__name__)

_PREFIXES = ("/mcp/", "/http/", "/llm/", "/runs/")
# The guard in front matches the path once and leaves the answer in the scope under this key
# (None: not a proxy path), so the router does not match it again.
ROUTE_KEY = "tracecard.proxy_route"
_KINDS = ("mcp", "http", "llm")


def match(path: str) -> tuple[str, str | None, str, str] | None:
    """(kind, run id, upstream, rest of path) for a proxy path, else None."""
    if not path.startswith(_PREFIXES):
        return None
    parts = path.split("/", 5)  # "", first, ...
    run_id: str | None = None
    if parts[1] == "runs":
        if len(parts) < 5 or not parts[2] or parts[3] not in _KINDS:
            return None
        run_id = parts[2]
        parts = ["", *parts[3:]]
        rest = parts[3] if len(parts) > 3 else ""
        if len(parts) > 4:
            rest = f"{rest}/{parts[4]}"
    else:
        parts = path.split("/", 3)
        rest = parts[3] if len(parts) > 3 else ""
    kind, name = parts[1], parts[2] if len(parts) > 2 else ""
    if not name:
        return None
    if kind == "mcp" and rest:
        return None  # nothing lives below an MCP endpoint
    return kind, run_id, name, rest


def _wrong_kind(name: str, kind: str) -> str:
    if kind in MODEL_KINDS:
        return f"upstream {name!r} is a model API ({kind}): use /llm/{name}/"
    where = f"/http/{name}/" if kind == "http" else f"/mcp/{name}"
    return f"upstream {name!r} is not a model API: use {where}"


class ProxyRouter:
    """The ASGI app as served: proxy paths handled here, everything else by `app` (Litestar)."""

    def __init__(self, app: Any) -> None:
        # the handlers, imported once here (not per call; not at import: they import this)
        from tracecard.server.proxy.forward import scan_request_headers
        from tracecard.server.proxy.http import handle_http
        from tracecard.server.proxy.llm import handle_llm
        from tracecard.server.proxy.mcp import handle_mcp
        from tracecard.server.proxy.sessions import named_run

        self.app = app
        self._state: ProxyState | None = None
        self._http, self._llm, self._mcp = handle_http, handle_llm, handle_mcp
        self._scan, self._named_run = scan_request_headers, named_run

    def _proxy_state(self) -> ProxyState | None:
        if self._state is None:
            runtime = getattr(self.app.state, "runtime", None)
            if runtime is not None:
                self._state = runtime.proxy
        return self._state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http":
            route = scope[ROUTE_KEY] if ROUTE_KEY in scope else match(scope["path"])
        if route is None:
            await self.app(scope, receive, send)
            return
        # a proxy path, served here (in this coroutine: one frame fewer on every call)
        kind, run_id, name, rest = route
        state = self._state or self._proxy_state()
        try:
            if state is None:
                raise ProxyError(503, "tracecard is starting or stopping: the proxy is not ready")
            upstream = state.upstreams.get(name)
            if upstream is None:
                configured = sorted(state.upstreams)
                listed = ", ".join(configured) or "none (add [upstreams.NAME] to tracecard.toml)"
                raise ProxyError(
                    404, f"no upstream named {name!r}; configured: {listed}", upstreams=configured
                )
            settings = upstream.settings
            if (kind == "llm") != (settings.kind in MODEL_KINDS):
                raise ProxyError(404, _wrong_kind(name, settings.kind))
            if kind == "llm":
                await self._llm(state, scope, receive, send, upstream, run_id, rest)
                return
            if kind == "mcp" and settings.kind == "http":
                raise ProxyError(404, f"upstream {name!r} is a plain HTTP tool: use /http/{name}/")
            if kind == "http" and settings.kind != "http":
                raise ProxyError(404, f"upstream {name!r} is an MCP server: use /mcp/{name}")
            if settings.command is not None:
                await self._stdio(state, scope, receive, send, name, run_id)
            elif kind == "mcp":
                await self._mcp(state, scope, receive, send, upstream, run_id)
            else:
                await self._http(state, scope, receive, send, upstream, run_id, rest)
        except ProxyError as error:
            await send_error(send, error)
        except BodyTooLarge as error:
            await send_error(send, ProxyError.too_large(error))
        except ClientGone as error:
            await send_error(send, ProxyError(400, str(error)))

    async def _stdio(
        self,
        state: ProxyState,
        scope: Scope,
        receive: Receive,
        send: Send,
        name: str,
        run_id: str | None,
    ) -> None:
        """Upstreams with `command` are bridged by the stdio feature, when it is installed."""
        handler = state.runtime.stdio
        if handler is None:
            raise ProxyError(
                501,
                f"upstream {name!r} is a stdio server (`command`), and this tracecard has no "
                "stdio bridge installed",
            )
        headers = self._scan(scope["headers"], state.runtime.verifier_key)
        # ad hoc (None) is the bridge's to choose: it knows a session's initialize from the rest
        await handler(scope, receive, send, name, await self._named_run(state, headers, run_id))
