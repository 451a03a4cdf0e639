"""One stdio MCP server process: spawn, newline-framed JSON-RPC, id remapping, handshake, stop.

tracecard owns the session with the process: it performs the `initialize` handshake once and
forwards every client's requests under ids of its own, so many HTTP clients (of either protocol
generation) can share one process. Every message in both directions is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from opentelemetry.trace import Status, StatusCode

from tracecard import __version__
from tracecard.server.asgi import json_bytes
from tracecard.server.recording.recorder import Exchange, PendingCall, Recorder, traceparent_header
from tracecard.server.stdio.messages import (
    DIRECTION_ATTRIBUTE,
    HANDSHAKE_VERSION,
    LINE_LIMIT,
    STDERR_TAIL,
    Sink,
    UpstreamError,
    _ServerRequest,
    _Waiter,
)
from tracecard.traces import semconv

log = logging.getLogger(__name__)

# on the handshake span of a process a warm pool started before its run needed it
WARM_ATTRIBUTE = "tracecard.upstream.warm"


@dataclass
class StdioProcess:
    """A running stdio server. Create with `start()`; every failure raises `UpstreamError`."""

    name: str
    command: list[str]
    env: dict[str, str]
    cwd: str | None
    recorder: Recorder
    on_exit: Callable[[StdioProcess], None] | None = None
    inject_traceparent: bool = True
    initialize_result: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)  # sent in the handshake
    forwarded: int = 0  # requests sent after the handshake (0: pristine, safe to replace)
    started_ns: int = 0
    warm: bool = False  # spawned ahead of its run by the warm pool (server/stdio/warm.py)
    exit_code: int | None = None
    stopping: bool = False
    # messages for clients that are not about one request (list_changed, logging)
    listeners: set[Sink] = field(default_factory=set)
    _proc: asyncio.subprocess.Process | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _waiters: dict[int, _Waiter] = field(default_factory=dict)
    _server_requests: dict[str, _ServerRequest] = field(default_factory=dict)
    _stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=64))
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _exited: asyncio.Event = field(default_factory=asyncio.Event)
    _exchange: Exchange | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and not self._exited.is_set()

    @property
    def running(self) -> bool:
        """The process has not exited (known before its stdout is read, unlike `alive`)."""
        return self._proc is not None and self._proc.returncode is None

    async def wait(self) -> int | None:
        """Until the process exits: its exit code (None if it never started)."""
        return await self._proc.wait() if self._proc is not None else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stderr_tail(self) -> str:
        tail = b"".join(self._stderr)[-STDERR_TAIL:]
        return tail.decode("utf-8", errors="replace").strip()

    def _failure(self, what: str) -> str:
        tail = self.stderr_tail()
        return f"upstream {self.name!r} {what}" + (f"; stderr tail:\n{tail}" if tail else "")

    async def spawn(self) -> None:
        """Start the command without a word to it: a warm process waits like this, its stdout
        unread, until `start()` hands it to a run (server/stdio/warm.py)."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                start_new_session=True,  # its own process group: stopped with all its children
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise UpstreamError(
                f"upstream {self.name!r}: cannot start {self.command[0]!r}: "
                f"{exc.strerror or exc} (command: {' '.join(self.command)})"
            ) from exc
        self.started_ns = time.time_ns()
        # stderr is read from the spawn: a chatty start never blocks on a full pipe
        self._tasks = [asyncio.get_running_loop().create_task(self._read_stderr())]

    async def start(self, exchange: Exchange, timeout: float) -> None:
        """Spawn the command (unless a warm pool did) and perform the `initialize` handshake
        (recorded under `exchange`)."""
        self._exchange = exchange
        spawned_ns = time.time_ns()
        if self._proc is None:
            await self.spawn()
        self._tasks = [asyncio.get_running_loop().create_task(self._read_stdout()), *self._tasks]
        handshake = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": self.client_capabilities,
                "clientInfo": {"name": "tracecard", "version": __version__},
            },
        }
        # The handshake's span starts at the spawn: its duration is the server's start-up time.
        pending = self.recorder.start(handshake, exchange, start_ns=spawned_ns)
        pending.span.set_attribute(semconv.UPSTREAM_STARTUP, True)
        if self.warm:
            pending.span.set_attribute(WARM_ATTRIBUTE, True)
        try:
            response = await self.call(handshake, exchange, timeout, pending=pending)
        except UpstreamError:
            await self.stop()
            raise
        if "error" in response or not isinstance(response.get("result"), dict):
            await self.stop()
            raise UpstreamError(self._failure(f"refused initialize: {response.get('error')}"))
        self.initialize_result = response["result"]
        await self.notify({"jsonrpc": "2.0", "method": "notifications/initialized"}, exchange)

    async def stop(self, grace: float = 2.0) -> None:
        """Close stdin, then SIGTERM and SIGKILL the process group; fail what is still open."""
        self.stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            for sig, wait in ((None, grace), (signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
                try:
                    await asyncio.wait_for(proc.wait(), wait)
                    break
                except TimeoutError:
                    continue
        if proc is not None:  # children that outlived the leader
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._exchange is not None:  # its stdout is read (a warm process's is not yet)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exited.wait(), 2.0)
        for task in self._tasks:
            task.cancel()
        self._fail_all(UpstreamError(f"upstream {self.name!r} was stopped"))

    # --- sending --------------------------------------------------------------------------------
    async def _write(self, message: Mapping[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or not self.alive:
            raise UpstreamError(self._failure(f"is not running (exit code {self.exit_code})"))
        try:
            line = json_bytes(message) + b"\n"
        except RecursionError as exc:
            raise UpstreamError(
                f"the message to {self.name!r} is nested too deep to forward ({exc})",
                semconv.ERR_PROTOCOL,
            ) from exc
        try:
            async with self._write_lock:
                proc.stdin.write(line)
                await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise UpstreamError(self._failure(f"closed its stdin ({exc})")) from exc

    async def call(
        self,
        message: dict[str, Any],
        exchange: Exchange,
        timeout: float,
        sink: Sink | None = None,
        pending: PendingCall | None = None,
    ) -> dict[str, Any]:
        """Forward one request; the response comes back with the client's own id."""
        pending = pending or self.recorder.start(message, exchange)
        upstream_id = next(self._ids)
        params = message.get("params")
        forwarded = dict(message, id=upstream_id)
        if self.inject_traceparent and isinstance(params, dict):
            meta = params.get("_meta")
            if not isinstance(meta, dict) or "traceparent" not in meta:
                meta = dict(meta or {}, traceparent=traceparent_header(pending.span))
                forwarded["params"] = dict(params, _meta=meta)
        token = params.get("_meta", {}).get("progressToken") if isinstance(params, dict) else None
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(future, message.get("id"), pending, sink, token)
        waiter.handshake = message.get("method") == "initialize"
        self.forwarded += not waiter.handshake
        waiter.exchange = self._exchange = exchange
        self._waiters[upstream_id] = waiter
        try:
            await self._write(forwarded)
            response = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            self.recorder.fail(pending, semconv.ERR_TIMEOUT, f"no answer within {timeout:g}s")
            raise UpstreamError(
                f"upstream {self.name!r} did not answer {message.get('method')} "
                f"within {timeout:g}s",
                semconv.ERR_TIMEOUT,
            ) from None
        except UpstreamError as exc:
            self.recorder.fail(pending, exc.error_type, str(exc))
            raise
        except asyncio.CancelledError:  # the server stopped waiting: the span ends all the same
            self.recorder.fail(pending, "cancelled", "tracecard stopped before the answer came")
            raise
        finally:
            self._waiters.pop(upstream_id, None)
        self.recorder.finish(pending, response)
        return dict(response, id=waiter.client_id)

    async def notify(self, message: dict[str, Any], exchange: Exchange) -> None:
        """Forward a client notification (a `notifications/cancelled` id is translated)."""
        pending = self.recorder.start(message, exchange)
        params = message.get("params")
        if message.get("method") == "notifications/cancelled" and isinstance(params, dict):
            for upstream_id, waiter in self._waiters.items():
                if waiter.client_id == params.get("requestId"):
                    message = dict(message, params=dict(params, requestId=upstream_id))
                    break
        try:
            await self._write(message)
        except UpstreamError as exc:
            self.recorder.fail(pending, exc.error_type, str(exc))
            raise
        self.recorder.finish(pending, None)

    async def answer_server(self, response: dict[str, Any]) -> bool:
        """A client's response to a server->client request; False when no such request is open."""
        relayed = self._server_requests.pop(str(response.get("id")), None)
        if relayed is None:
            return False
        self.recorder.finish(relayed.pending, response)
        await self._write(dict(response, id=relayed.server_id))
        return True

    # --- receiving ------------------------------------------------------------------------------
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
