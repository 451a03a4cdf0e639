"""The reading side of a stdio MCP server process (`StdioProcess`): its stdout's newline-framed
JSON-RPC messages dispatched to the requests waiting for them, to the client that a server
request or notification concerns, or to the listeners; its stderr's tail kept for errors; its
exit failing what is still open. A mixin of `StdioProcess` (server/stdio/process.py), whose
fields it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry.trace import Status, StatusCode

from tracecard.server.stdio.messages import (
    DIRECTION_ATTRIBUTE,
    LINE_LIMIT,
    STDERR_TAIL,
    Sink,
    UpstreamError,
    _ServerRequest,
    _Waiter,
)
from tracecard.traces import semconv

if TYPE_CHECKING:
    from tracecard.server.recording.recorder import Exchange, Recorder

__all__ = ["StdioReading"]

log = logging.getLogger(__name__)


class StdioReading:
    """Reads a `StdioProcess`'s stdout and stderr (its fields are declared there)."""

    name: str
    recorder: Recorder
    on_exit: Callable[[Any], None] | None  # given the StdioProcess itself
    initialize_result: dict[str, Any]
    exit_code: int | None
    stopping: bool
    listeners: set[Sink]
    _proc: asyncio.subprocess.Process | None
    _ids: itertools.count[int]
    _waiters: dict[int, _Waiter]
    _server_requests: dict[str, _ServerRequest]
    _stderr: deque[bytes]
    _tasks: list[asyncio.Task[None]]
    _exited: asyncio.Event
    _exchange: Exchange | None

    if TYPE_CHECKING:

        async def _write(self, message: Mapping[str, Any]) -> None: ...

    def stderr_tail(self) -> str:
        tail = b"".join(self._stderr)[-STDERR_TAIL:]
        return tail.decode("utf-8", errors="replace").strip()

    def _failure(self, what: str) -> str:
        tail = self.stderr_tail()
        return f"upstream {self.name!r} {what}" + (f"; stderr tail:\n{tail}" if tail else "")

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:  # a line over LINE_LIMIT: the framing is lost
                    self._protocol_error(b"", f"a stdout line longer than {LINE_LIMIT} bytes")
                    continue
                if not line:
                    break
                if line.strip():
                    await self._dispatch_line(line.rstrip(b"\r\n"))
        except Exception:  # never let a bad message kill the reader silently
            log.exception("stdio reader of upstream %s failed", self.name)
        finally:
            await self._on_eof()

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(4096):
            self._stderr.append(chunk)
            log.debug("upstream %s stderr: %s", self.name, chunk[:500])

    async def _on_eof(self) -> None:
        proc = self._proc
        assert proc is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5.0)
        if self._tasks[1:] and not self._tasks[1].done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._tasks[1]), 1.0)
        self.exit_code = proc.returncode
        self._exited.set()
        self._fail_all(UpstreamError(self._failure(f"exited with code {self.exit_code}")))
        if self.on_exit is not None and not self.stopping and self.initialize_result:
            self.on_exit(self)

    def _fail_all(self, error: UpstreamError) -> None:
        for waiter in list(self._waiters.values()):
            if not waiter.future.done():
                waiter.future.set_exception(error)
        for relayed in self._server_requests.values():
            self.recorder.fail(relayed.pending, error.error_type, str(error))
        self._server_requests.clear()

    def _protocol_error(self, raw: bytes, reason: str) -> None:
        """A non-JSON-RPC line: recorded; the oldest open request gets a protocol error."""
        target = next(
            (w for w in self._waiters.values() if not w.future.done() and not w.handshake), None
        )
        exchange = target.exchange if target is not None else self._exchange
        if exchange is not None:
            span = self.recorder.unparsable(raw, reason, exchange, "upstream output")
            span.set_attribute(semconv.ERROR_TYPE, semconv.ERR_PROTOCOL)
            span.set_attribute(DIRECTION_ATTRIBUTE, "server_to_client")
            span.set_status(Status(StatusCode.ERROR, reason))
            span.end()
        if target is not None:
            target.future.set_exception(
                UpstreamError(
                    f"upstream {self.name!r} broke the protocol: {reason}", semconv.ERR_PROTOCOL
                )
            )

    async def _dispatch_line(self, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._protocol_error(raw, f"stdout line is not JSON: {exc}")
            return
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict) or item.get("jsonrpc") != "2.0":
                self._protocol_error(raw, "stdout line is not a JSON-RPC 2.0 message")
                continue
            await self._dispatch(item)

    async def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a response
            waiter = self._waiters.get(message.get("id"))  # type: ignore[arg-type]
            if waiter is not None and not waiter.future.done():
                waiter.future.set_result(message)
            else:
                log.info("upstream %s answered unknown id %r", self.name, message.get("id"))
            return
        if "id" in message:
            await self._server_request(message)
            return
        await self._server_notification(message)

    def _waiter_for(self, message: Mapping[str, Any]) -> _Waiter | None:
        params = message.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        related = (
            params.get("_meta", {}).get("io.modelcontextprotocol/related-request")
            if isinstance(params, dict) and isinstance(params.get("_meta"), dict)
            else None
        )
        for waiter in self._waiters.values():
            if token is not None and waiter.progress_token == token:
                return waiter
            if related is not None and waiter.client_id == related:
                return waiter
        return None

    async def _server_notification(self, message: dict[str, Any]) -> None:
        waiter = self._waiter_for(message)
        if waiter is not None and waiter.pending is not None:
            params = message.get("params")
            text, _ = self.recorder.redactor.text(params)
            waiter.pending.span.add_event(
                str(message.get("method")),
                {semconv.MCP_METHOD_NAME: str(message.get("method")), semconv.RPC_PARAMS: text},
            )
            if waiter.sink is not None and await waiter.sink(message):
                return
        elif self._exchange is not None:
            pending = self.recorder.start(message, self._exchange)
            pending.span.set_attribute(DIRECTION_ATTRIBUTE, "server_to_client")
            self.recorder.finish(pending, None)
        for listener in list(self.listeners):
            await listener(message)

    async def _server_request(self, message: dict[str, Any]) -> None:
        """A server->client request: relayed to a waiting client, else refused by tracecard."""
        exchange = self._exchange
        assert exchange is not None
        pending = self.recorder.start(message, exchange)
        pending.span.set_attribute(DIRECTION_ATTRIBUTE, "server_to_client")
        client_id = f"tracecard-{next(self._ids)}"
        relayed = dict(message, id=client_id)
        self._server_requests[client_id] = _ServerRequest(message["id"], pending)
        targets = [w.sink for w in self._waiters.values() if w.sink is not None]
        for sink in targets or list(self.listeners):  # during calls, only to their callers
            if await sink(relayed):
                return
        self._server_requests.pop(client_id, None)
        refusal = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": "no waiting agent declared this capability"},
        }
        self.recorder.finish(pending, refusal)
        with contextlib.suppress(UpstreamError):
            await self._write(refusal)
