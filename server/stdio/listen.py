"""`subscriptions/listen` for stateless (2026-07-28) clients of a stdio upstream.

A 2026-07-28 client has no standing stream: it opts in to change notifications with a
`subscriptions/listen` request whose SSE response is the stream (the specification's
"Subscriptions" pattern). A stdio server speaks the session protocol: it sends its list changes
unsolicited on stdout. The bridge serves the listen itself:

- the honored filter is the requested list changes the server says it sends (`listChanged` on
  its `tools`, `prompts`, `resources` capability); `resourceSubscriptions` is not honored (it
  would need `resources/subscribe` per URI on a process other clients share) and is left out of
  the acknowledgment, as the specification says of types a server does not support;
- the first frame is `notifications/subscriptions/acknowledged`; then each list change of the
  process that serves the request's run (a `per_run` process: that run's only) whose type was
  honored, stamped with `io.modelcontextprotocol/subscriptionId` (the listen request's id);
  nothing else (progress and log messages belong to the request they concern, server requests
  to the calls that caused them);
- the stream ends when the client closes it, or gracefully (the listen request's `complete`
  result, stamped the same) when the run finishes or tracecard shuts down;
- a server that says it sends no list changes does not support listening: the request is
  forwarded to it, and the client gets that server's own answer (a session-protocol server's
  `-32601 Method not found`).

The listen is recorded as one span from the request to the stream's end, each relayed
notification an event on it. A notification carries no list: the agent lists again, and a
verifier-only tool stays out of that answer as out of any other (server/proxy/visibility.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from tracecard.server.asgi import (
    CODE_INVALID,
    CODE_UPSTREAM,
    Receive,
    Send,
    jsonrpc_error,
    send_json,
    wait_disconnect,
)
from tracecard.server.recording.recorder import Exchange, PendingCall
from tracecard.server.runtime import Runtime
from tracecard.server.stdio.calls import StdioCalls
from tracecard.server.stdio.messages import MODERN_META_PREFIX, UpstreamError, strip_modern_meta
from tracecard.server.stdio.pool import StdioUpstreams
from tracecard.server.stdio.sse import KEEPALIVE_S, SseStream
from tracecard.traces.models import RunRow

__all__ = ["METHOD", "Listens", "honored", "offered"]

METHOD = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_META = MODERN_META_PREFIX + "subscriptionId"
HONORED_ATTRIBUTE = "tracecard.listen.honored"
END_ATTRIBUTE = "tracecard.listen.end"  # client_closed | run_finished | shutdown
BACKLOG = 1024  # undelivered notifications per stream (list changes are deduplicated anyway)
# the notification, the filter field that asks for it, the server capability that announces it
LIST_CHANGES = {
    "notifications/tools/list_changed": ("toolsListChanged", "tools"),
    "notifications/prompts/list_changed": ("promptsListChanged", "prompts"),
    "notifications/resources/list_changed": ("resourcesListChanged", "resources"),
}


def offered(server_capabilities: Any) -> set[str]:
    """The filter fields a server can deliver: those whose capability says `listChanged`."""
    if not isinstance(server_capabilities, Mapping):
        return set()
    return {
        field
        for field, capability in LIST_CHANGES.values()
        if isinstance(server_capabilities.get(capability), Mapping)
        and server_capabilities[capability].get("listChanged") is True
    }


def honored(requested: Mapping[str, Any], can: set[str]) -> dict[str, Any]:
    """The acknowledged filter: what was asked for (`true`) and can be delivered."""
    return {field: True for field in sorted(can) if requested.get(field) is True}


def _stamped(message: dict[str, Any], subscription: Any) -> dict[str, Any]:
    given = message.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    found = params.get("_meta")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    return dict(message, params={**params, "_meta": {**meta, SUBSCRIPTION_META: subscription}})


class Listens:
    """Open listen streams by run id, so that a finished run's streams end gracefully."""

    def __init__(self, runtime: Runtime, calls: StdioCalls, pool: StdioUpstreams) -> None:
        self.runtime = runtime
        self.calls = calls
        self.pool = pool
        self._ending: dict[str, set[asyncio.Event]] = {}

    async def after_finish(self, _runtime: Runtime, run: RunRow) -> None:
        """`after_finish` hook: the run's listen streams end with their `complete` result."""
        for ended in self._ending.pop(run.id, set()):
            ended.set()

    async def serve(
        self,
        receive: Receive,
        send: Send,
        upstream: str,
        exchange: Exchange,
        message: dict[str, Any],
    ) -> None:
        """Answer one stateless `subscriptions/listen` request (see the module's doc)."""
        recorder = self.calls.recorder
        try:
            process = await self.calls.process(upstream, exchange)
        except UpstreamError as exc:
            pending = recorder.start(message, exchange)
            recorder.fail(pending, exc.error_type, str(exc))
            await send_json(send, 200, jsonrpc_error(message["id"], CODE_UPSTREAM, str(exc)))
            return
        initialize = getattr(process, "initialize_result", None) or {}
        can = offered(initialize.get("capabilities"))
        if not can:  # the server's own answer, whatever it is (its HTTP status as the SDK's)
            from tracecard.server.stdio import ladder  # the SDK's table (loaded on first use)

            reply = await self.calls.forward(upstream, strip_modern_meta(message), exchange)
            await send_json(send, ladder.http_status(reply), reply)
            return
        params = message.get("params")
        requested = params.get("notifications") if isinstance(params, dict) else None
        pending = recorder.start(message, exchange)
        if not isinstance(requested, dict):
            reply = jsonrpc_error(
                message["id"], CODE_INVALID, "subscriptions/listen needs params.notifications"
            )
            recorder.finish(pending, reply)
            await send_json(send, 200, reply)
            return
        kept = honored(requested, can)
        pending.span.set_attribute(HONORED_ATTRIBUTE, sorted(kept))
        await self._stream(receive, send, upstream, exchange, message["id"], kept, pending)

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        upstream: str,
        exchange: Exchange,
        subscription: Any,
        kept: dict[str, Any],
        pending: PendingCall,
    ) -> None:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(BACKLOG)
        waiting: set[str] = set()  # list changes queued and not yet written: one is enough

        async def relay(notification: dict[str, Any]) -> bool:
            method = str(notification.get("method"))
            wanted = LIST_CHANGES.get(method)
            if "id" in notification or wanted is None or not kept.get(wanted[0]):
                return False  # a server request, or a notification this stream did not ask for
            if method not in waiting and not queue.full():
                waiting.add(method)
                queue.put_nowait(_stamped(notification, subscription))
            return True

        slot = self.pool.slot(upstream, exchange.run)
        ended = asyncio.Event()
        self._ending.setdefault(exchange.run.id, set()).add(ended)
        slot.listeners.add(relay)  # before the acknowledgment: nothing is missed in between
        stream = SseStream(send)
        acknowledgment = {
            "jsonrpc": "2.0",
            "method": ACKNOWLEDGED,
            "params": {"_meta": {SUBSCRIPTION_META: subscription}, "notifications": kept},
        }
        gone = asyncio.ensure_future(wait_disconnect(receive))
        stops = {
            "run_finished": asyncio.ensure_future(ended.wait()),
            "shutdown": asyncio.ensure_future(self.runtime.draining.wait()),
        }
        end = "client_closed"
        try:
            await stream.event(acknowledgment)
            while not stream.closed:
                following = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {following, gone, *stops.values()},
                    timeout=KEEPALIVE_S,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if following in done:
                    notification = following.result()
                    waiting.discard(str(notification.get("method")))
                    self.calls.recorder.note(pending, notification)
                    await stream.event(notification)
                    continue
                following.cancel()
                if gone in done:
                    break
                stopped = [reason for reason, task in stops.items() if task in done]
                if stopped:
                    end = stopped[0]
                    break
                await stream.write(b": keepalive\r\n\r\n")
        finally:
            slot.listeners.discard(relay)
            streams = self._ending.get(exchange.run.id)
            if streams is not None:
                streams.discard(ended)
                if not streams:
                    del self._ending[exchange.run.id]
            for task in (gone, *stops.values()):
                task.cancel()
            pending.span.set_attribute(END_ATTRIBUTE, end)
            result = None
            if end != "client_closed":  # the specification's graceful closure
                meta = {SUBSCRIPTION_META: subscription}
                result = {
                    "jsonrpc": "2.0",
                    "id": subscription,
                    "result": {"resultType": "complete", "_meta": meta},
                }
            self.calls.recorder.finish(pending, result)  # ended before the client can ask
            if result is not None:
                with contextlib.suppress(OSError):
                    await stream.event(result)
            await stream.close()
