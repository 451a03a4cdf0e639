"""MCP streamable HTTP in front of a stdio server, for clients of both protocol generations.

Session protocol (2025-11-25): `initialize` is answered from the process's own handshake with
tracecard and opens an `Mcp-Session-Id`; requests are answered as SSE (progress and server
requests stream before the answer) or JSON; a GET opens the session's stream of server messages;
DELETE closes the session. Stateless protocol (2026-07-28): `server/discover` is answered from
the same handshake, each request is one POST answered with JSON, the per-request `_meta`
envelope is taken off before the session-protocol server sees the request.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from tracecard.server.asgi import (
    CODE_INVALID,
    CODE_PARSE,
    CODE_UPSTREAM,
    BodyTooLarge,
    ClientGone,
    Receive,
    Scope,
    Send,
    header_map,
    jsonrpc_error,
    read_body,
    send_bytes,
    send_json,
    wait_disconnect,
)
from tracecard.server.mcp_versions import modern_versions
from tracecard.server.mrtr.bridge import BridgeRounds
from tracecard.server.mrtr.calls import INPUT_REQUIRED
from tracecard.server.proxy.grouping import Unbound, adhoc_for_request, client_info
from tracecard.server.proxy.sessions import IdleLru
from tracecard.server.recording.recorder import Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runtime import Runtime
from tracecard.server.stdio import capabilities, handshake, listen
from tracecard.server.stdio.calls import StdioCalls
from tracecard.server.stdio.messages import (
    MODERN_META_PREFIX,
    VERSION_HEADER,
    UpstreamError,
    is_modern,
    strip_modern_meta,
)
from tracecard.server.stdio.pool import StdioUpstreams
from tracecard.server.stdio.sse import KEEPALIVE_S, SseStream

log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
# Results the 2026-07-28 wire requires caching directives on (`ttlMs`, `cacheScope`).
CACHEABLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)


@dataclass
class Session:
    """One session-protocol client of a stdio upstream."""

    id: str
    upstream: str
    run: RunInfo
    protocol_version: str
    closed: asyncio.Event
    adhoc_key: str | None = None  # the ad-hoc run key, when the session named no run
    capabilities: dict[str, Any] = field(default_factory=dict)  # what its agent declared
    stopping: asyncio.Task[None] | None = None  # its per-run processes, once forgotten


class StdioBridge:
    """The ASGI handler the proxy calls for an upstream configured with `command`."""

    def __init__(self, runtime: Runtime, recorder: Recorder, pool: StdioUpstreams) -> None:
        self.runtime = runtime
        self.recorder = recorder
        self.pool = pool
        self.calls = StdioCalls(runtime, recorder, pool)
        self.rounds = BridgeRounds(recorder)  # multi round-trip calls of stateless clients
        self.listens = listen.Listens(runtime, self.calls, pool)  # subscriptions/listen streams
        # bounded like the proxy's: stateless and careless clients never send DELETE
        self.sessions: IdleLru[str, Session] = IdleLru(on_forget=self._forget)

    def _forget(self, _session_id: str, session: Session) -> None:
        """A session left (DELETE, eviction, idle): end its stream, free its ad-hoc run."""
        session.closed.set()
        if session.adhoc_key is None:
            return
        if self.runtime.adhoc is not None:  # a stdio session is its own run: it ends with it
            self.runtime.adhoc.end_soon(session.run, "closed")
        self.runtime.runs.forget_adhoc(session.adhoc_key, session.run)
        settings = self.runtime.settings.upstreams.get(session.upstream)
        if settings is not None and settings.per_run and not self.pool.closed:
            stop = self.pool.stop_run(session.run.id)
            session.stopping = asyncio.get_running_loop().create_task(stop)

    async def close(self) -> None:
        for session in self.sessions.values():
            session.closed.set()
        await self.pool.close()

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, upstream: str, run: RunInfo | None
    ) -> None:
        """Serve one HTTP request for stdio upstream `upstream` in `run` (None: ad hoc)."""
        settings = self.runtime.settings.upstreams.get(upstream)
        if settings is None or settings.command is None:
            await send_json(send, 404, {"detail": f"no stdio upstream named {upstream!r}"})
            return
        headers = header_map(scope)
        method = scope.get("method", "GET")
        if method == "GET":
            await self._stream(scope, receive, send, headers)
        elif method == "DELETE":
            known = self.sessions.get(headers.get(SESSION_HEADER, ""))
            if known is not None and known.adhoc_key is not None and self.runtime.adhoc:
                self.runtime.adhoc.end_soon(known.run, "deleted")
            session = self.sessions.pop(headers.get(SESSION_HEADER, ""))
            if session is not None and session.stopping is not None:
                await session.stopping
            await send_bytes(send, 200 if session else 404, content_type=None)
        elif method == "POST":
            await self._post(scope, receive, send, headers, upstream, run)
        else:
            await send_bytes(
                send, 405, content_type=None, headers=[(b"allow", b"GET, POST, DELETE")]
            )

    # --- POST -----------------------------------------------------------------------------------
    async def _post(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        upstream: str,
        run: RunInfo | None,
    ) -> None:
        try:
            body = await read_body(receive, self.runtime.settings.max_body_bytes)
        except BodyTooLarge as exc:
            await send_json(send, 413, {"status_code": 413, "detail": str(exc), "limit": exc.limit})
            return
        except ClientGone:
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            exchange = self.calls.exchange(
                upstream, run or self._adhoc(scope, upstream, headers, None), headers
            )
            span = self.recorder.unparsable(body, f"not valid JSON: {exc}", exchange, "parse error")
            span.end()
            await send_json(send, 400, jsonrpc_error(None, CODE_PARSE, f"Parse error: {exc}"))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await send_json(
                send, 400, jsonrpc_error(None, CODE_INVALID, "expected one JSON-RPC message")
            )
            return
        if is_modern(message, headers):
            await self._modern(scope, receive, send, headers, upstream, run, message)
        else:
            await self._legacy(scope, send, headers, upstream, run, message)

    def _adhoc(
        self, scope: Scope, upstream: str, headers: dict[str, str], message: dict[str, Any] | None
    ) -> RunInfo:
        """A stateless client's ad-hoc run, grouped as in the proxy (trace context, client)."""
        client = scope.get("client")
        request = Unbound(
            address=str(client[0]) if client else "unknown",
            upstream=upstream,
            message=message,
            traceparent=headers.get("traceparent"),
            baggage=headers.get("baggage"),
            user_agent=headers.get("user-agent", ""),
        )
        return adhoc_for_request(self.runtime.runs, request)

    # --- stateless protocol (2026-07-28) --------------------------------------------------------
    async def _modern(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        upstream: str,
        run: RunInfo | None,
        message: dict[str, Any],
    ) -> None:
        # the SDK's inbound checks (`mcp.shared.inbound`): loaded with the first stateless
        # request, not at every tracecard start (~0.4 s of CPU)
        from tracecard.server.stdio import ladder

        version = headers.get(VERSION_HEADER) or modern_versions()[-1]
        exchange = self.calls.exchange(
            upstream, run or self._adhoc(scope, upstream, headers, message), headers, None, version
        )
        if "id" not in message or "method" not in message:
            await send_bytes(send, 202, content_type=None)  # notifications are acknowledged
            return
        if (refused := ladder.refusal(message, scope, headers)) is not None:
            pending = self.recorder.start(message, exchange)  # what the SDK's server refuses
            self.recorder.finish(pending, refused)
            await send_json(send, ladder.http_status(refused), refused)
            return
        await capabilities.declare(self.pool, upstream, exchange, message)
        if message["method"] == listen.METHOD:
            await self.listens.serve(receive, send, upstream, exchange, message)
            return
        if message["method"] == "server/discover":
            try:
                process = await self.calls.process(upstream, exchange)
            except UpstreamError as exc:
                pending = self.recorder.start(message, exchange)
                self.recorder.fail(pending, exc.error_type, str(exc))
                await send_json(send, 200, jsonrpc_error(message["id"], CODE_UPSTREAM, str(exc)))
                return
            init = process.initialize_result
            discovered: dict[str, Any] = {
                "supportedVersions": list(modern_versions()),
                "capabilities": init.get("capabilities") or {},
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {MODERN_META_PREFIX + "serverInfo": init.get("serverInfo") or {}},
            }
            if init.get("instructions"):
                discovered["instructions"] = init["instructions"]
            await send_json(send, 200, await self.calls.answer_self(message, exchange, discovered))
            return
        # a server->client request during the call becomes an input_required round
        forwarded = strip_modern_meta(message)
        reply = await self.rounds.forward(self.calls, upstream, message, forwarded, exchange)
        result = reply.get("result")
        if isinstance(result, dict) and result.get("resultType") != INPUT_REQUIRED:
            # a session-protocol result, dressed for the stateless wire (nothing is cached)
            result = {"resultType": "complete", **result}
            if message["method"] in CACHEABLE:
                result = {"ttlMs": 0, "cacheScope": "private", **result}
            reply["result"] = result
        await send_json(send, ladder.http_status(reply), reply)

    # --- session protocol (2025-11-25 and earlier) ----------------------------------------------
    async def _legacy(
        self,
        scope: Scope,
        send: Send,
        headers: dict[str, str],
        upstream: str,
        run: RunInfo | None,
        message: dict[str, Any],
    ) -> None:
        if message.get("method") == "initialize":
            await self._initialize(scope, send, headers, upstream, run, message)
            return
        session = self.sessions.get(headers.get(SESSION_HEADER, ""))
        if session is None or session.upstream != upstream:
            status = 404 if headers.get(SESSION_HEADER) else 400
            detail = "unknown or closed session" if status == 404 else "missing Mcp-Session-Id"
            await send_json(send, status, jsonrpc_error(message.get("id"), CODE_INVALID, detail))
            return
        session_headers = [(b"mcp-session-id", session.id.encode())]
        if session.adhoc_key is not None:
            if session.run.status != "running":  # ended after an idle gap: a new run
                session.run = self.runtime.runs.adhoc(session.adhoc_key)
            session.run.last_seen = time.monotonic()
        exchange = self.calls.exchange(
            upstream, run or session.run, headers, session.id, session.protocol_version
        )
        if "method" not in message:  # the client answers a server->client request
            slot = self.pool.slot(upstream, exchange.run)
            if slot.process is not None:
                try:
                    await slot.process.answer_server(message)
                except UpstreamError as exc:
                    log.warning("%s", exc)
            await send_bytes(send, 202, content_type=None, headers=session_headers)
            return
        if "id" not in message:
            if message["method"] == "notifications/initialized":
                await self.calls.answer_self(message, exchange, None)
            else:
                try:
                    process = await self.calls.process(upstream, exchange)
                    await process.notify(message, exchange)
                except UpstreamError as exc:
                    log.warning("%s", exc)
            await send_bytes(send, 202, content_type=None, headers=session_headers)
            return
        if "text/event-stream" not in headers.get("accept", ""):
            reply = await self.calls.forward(upstream, message, exchange)
            await send_json(send, 200, reply, headers=session_headers)
            return
        stream = SseStream(send, session_headers)
        sink = handshake.capable(stream.event, session.capabilities)
        reply = await self.calls.forward(upstream, message, exchange, sink=sink)
        await stream.event(reply)
        await stream.close()

    async def _initialize(
        self,
        scope: Scope,
        send: Send,
        headers: dict[str, str],
        upstream: str,
        run: RunInfo | None,
        message: dict[str, Any],
    ) -> None:
        session_id = secrets.token_hex(16)
        adhoc_key = None if run is not None else f"mcp-session:{upstream}:{session_id}"
        run = run or self.runtime.runs.adhoc(str(adhoc_key), client=client_info(message))
        exchange = self.calls.exchange(upstream, run, headers, session_id)
        slot = self.pool.slot(upstream, run)
        agent = handshake.declared_capabilities(message)
        if slot.process is None or not slot.process.alive:
            slot.client_capabilities = agent  # the process to start declares the agent's
        try:
            process = await self.calls.process(upstream, exchange)
        except UpstreamError as exc:
            pending = self.recorder.start(message, exchange)
            self.recorder.fail(pending, exc.error_type, str(exc))
            await send_json(send, 200, jsonrpc_error(message.get("id"), CODE_UPSTREAM, str(exc)))
            return
        result = dict(process.initialize_result)
        version = str(result.get("protocolVersion") or "2025-11-25")
        exchange.protocol_version = version
        handshake.note_shared(upstream, slot.run, process.client_capabilities, agent)
        session = Session(session_id, upstream, run, version, asyncio.Event(), adhoc_key, agent)
        self.sessions.bind(session_id, session)
        reply = await self.calls.answer_self(message, exchange, result)
        await send_json(send, 200, reply, headers=[(b"mcp-session-id", session_id.encode())])

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        """The session's GET stream: server messages that belong to no request."""
        if "text/event-stream" not in headers.get("accept", ""):
            await send_bytes(send, 406, content_type=None)
            return
        session = self.sessions.get(headers.get(SESSION_HEADER, ""))
        if session is None:
            await send_json(send, 404, {"detail": "unknown or closed session"})
            return
        stream = SseStream(send, [(b"mcp-session-id", session.id.encode())])
        slot = self.pool.slot(session.upstream, session.run)
        listener = handshake.capable(stream.event, session.capabilities)
        slot.listeners.add(listener)
        gone = asyncio.ensure_future(wait_disconnect(receive))
        closed = asyncio.ensure_future(session.closed.wait())
        draining = asyncio.ensure_future(self.runtime.draining.wait())  # shutdown: end it
        try:
            await stream.start()
            while not stream.closed:
                done, _ = await asyncio.wait({gone, closed, draining}, timeout=KEEPALIVE_S)
                if done:
                    break
                await stream.write(b": keepalive\r\n\r\n")
        finally:
            slot.listeners.discard(listener)
            for waiting in (gone, closed, draining):
                waiting.cancel()
            await stream.close()
