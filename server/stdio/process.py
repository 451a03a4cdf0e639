"""One stdio MCP server process: spawn, newline-framed JSON-RPC, id remapping, handshake, stop
(its reading side, stdout dispatch and stderr, is `StdioReading` in server/stdio/reading.py).

tracecard owns the session with the process: it performs the `initialize` handshake once and
forwards every client's requests under ids of its own, so many HTTP clients (of either protocol
generation) can share one process. Every message in both directions is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracecard import __version__
from tracecard.server.asgi import json_bytes
from tracecard.server.recording.recorder import Exchange, PendingCall, Recorder, traceparent_header
from tracecard.server.stdio.messages import (
    HANDSHAKE_VERSION,
    LINE_LIMIT,
    Sink,
    UpstreamError,
    _ServerRequest,
    _Waiter,
)
from tracecard.server.stdio.reading import StdioReading
from tracecard.traces import semconv

# on the handshake span of a process a warm pool started before its run needed it
WARM_ATTRIBUTE = "tracecard.upstream.warm"
# how long a failed write waits for the process's exit, to name it as the cause
EXIT_SEEN_S = 1.0


@dataclass
class StdioProcess(StdioReading):
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
            # a process that exits at once (an import error, sys.exit) breaks the pipe before its
            # exit is read: say the exit, which is why, when it comes within a moment
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), EXIT_SEEN_S)
            if proc.returncode is not None:
                what = f"exited with code {proc.returncode} (its stdin closed: {exc})"
                raise UpstreamError(self._failure(what)) from exc
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
