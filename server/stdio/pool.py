"""Lifecycles of stdio upstream processes: shared (restarted with backoff) and per run.

A shared upstream has one process, started on first use; when it dies the crash is recorded
with the tail of its stderr and it is restarted after a delay that doubles with each quick crash.
A `per_run` upstream gets a fresh process (in a fresh sandbox when it has a fixture or uses
`{sandbox}`) on the run's first call; it is stopped when the run finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
from opentelemetry.trace import SpanKind, Status, StatusCode

from tracecard.server.recording.recorder import Exchange, Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runs.sandbox import (
    create_sandbox,
    needs_sandbox,
    substitute,
    uses_task_params,
)
from tracecard.server.runtime import Runtime
from tracecard.server.settings import ConfigError, UpstreamSettings
from tracecard.server.stdio.messages import (
    EXIT_CODE_ATTRIBUTE,
    STDERR_ATTRIBUTE,
    Sink,
    UpstreamError,
)
from tracecard.server.stdio.process import StdioProcess
from tracecard.server.stdio.reaper import Reaper
from tracecard.server.stdio.warm import Launch, WarmPool
from tracecard.traces import infra_failures, semconv
from tracecard.traces.models import RunRow

log = logging.getLogger(__name__)

QUICK_CRASH_S = 30.0  # a crash this soon after start counts towards the backoff
MAX_BACKOFF_S = 30.0


@dataclass
class Slot:
    """One process slot: the shared process of an upstream, or one run's process."""

    name: str
    run: RunInfo | None  # None for the shared slot
    process: StdioProcess | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    listeners: set[Sink] = field(default_factory=set)
    crashes: int = 0
    not_before: float = 0.0  # monotonic time before which no restart is attempted
    last_exchange: Exchange | None = None
    last_error: str | None = None  # why the last start failed (None after a good start)
    restart_task: asyncio.Task[None] | None = None
    # the capabilities the process declares in its handshake: those of the agent whose
    # `initialize` started it (the bridge relays sampling, elicitation, roots to that agent)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    last_used: float = 0.0  # monotonic time of the last call (the reaper stops idle ones)
    started: bool = False  # a process of this slot has started (its handshake got through)
    # a per-run slot whose process never started: (`sandbox_failed` | `upstream_never_started`,
    # why), also in the database (tracecard.traces.infra_failures), where the run's finish, on
    # whichever process, reads it
    never_started: tuple[str, str] | None = None


class _SandboxError(ConfigError):
    """A run's sandbox could not be made (its fixture is missing, a copy failed)."""


class StdioUpstreams:
    """Starts, restarts and stops the processes of every stdio upstream."""

    def __init__(self, runtime: Runtime, recorder: Recorder) -> None:
        self.runtime = runtime
        self.recorder = recorder
        self.shared: dict[str, Slot] = {}
        self.per_run: dict[tuple[str, str], Slot] = {}
        self.closed = False
        self.reaper = Reaper(self)
        self.warm = WarmPool(self)

    def upstream(self, name: str) -> UpstreamSettings:
        upstream = self.runtime.settings.upstreams[name]
        assert upstream.command is not None
        return upstream

    def timeout(self, name: str) -> float:
        return self.upstream(name).timeout_s or self.runtime.settings.upstream_timeout_s

    def slot(self, name: str, run: RunInfo) -> Slot:
        """The slot serving `run` on upstream `name` (created empty on first use)."""
        if self.upstream(name).per_run:
            key = (name, run.id)
            slot = self.per_run.get(key)
            if slot is None:
                slot = self.per_run[key] = Slot(name, run)
            return slot
        slot = self.shared.get(name)
        if slot is None:
            slot = self.shared[name] = Slot(name, None)
        return slot

    async def process_for(self, name: str, exchange: Exchange) -> StdioProcess:
        """The running process for this exchange's run, started (handshake done) if needed."""
        slot = self.slot(name, exchange.run)
        slot.last_exchange = exchange
        slot.last_used = time.monotonic()
        process = slot.process
        if process is not None and process.alive:
            return process
        async with slot.lock:
            if slot.process is not None and slot.process.alive:
                return slot.process
            if self.closed:
                raise UpstreamError(f"upstream {name!r}: tracecard is shutting down")
            wait = slot.not_before - time.monotonic()
            if wait > 0:  # backing off: fail fast rather than hold the agent for long
                if slot.last_error is not None or wait > self.timeout(name):
                    reason = slot.last_error or f"upstream {name!r} keeps crashing"
                    raise UpstreamError(f"{reason} (next start attempt in {wait:.1f}s)")
                await asyncio.sleep(wait)
            return await self._start(slot, exchange)

    async def resolve(self, name: str, run_id: str | None, sandbox: bool = True) -> Launch:
        """The command, environment and working directory upstream `name` is started with for
        run `run_id` (None: the shared process), its sandbox created first when it has one
        (with `sandbox=False`, only when the command, env or cwd name it)."""
        upstream = self.upstream(name)
        command, env, cwd = upstream.command or [], upstream.env, upstream.cwd
        path: Path | None = None
        if needs_sandbox(command, env, cwd) or (sandbox and upstream.fixture is not None):
            path = await self._sandbox(name, run_id, upstream)
        params: dict[str, str] | None = None
        if uses_task_params(command, env, cwd):  # one per-run definition serves every task
            lookup = self.runtime.hooks.task_params
            if run_id is None or lookup is None:
                raise ConfigError(f"upstream {name!r} uses {{task.…}}: it must be per_run")
            params = await lookup(self.runtime, run_id)
        env = {k: substitute(v, path, params) for k, v in env.items()}
        env.update(await self.warm.preload_env(name))
        resolved = substitute(cwd, path, params) if cwd else None
        return Launch(
            name,
            [substitute(part, path, params) for part in command],
            env,
            str(self.runtime.settings.resolve_path(resolved)) if resolved is not None else None,
            path,
        )

    async def _sandbox(self, name: str, run_id: str | None, upstream: UpstreamSettings) -> Path:
        settings = self.runtime.settings
        active = {f"{r}-{n}" for n, r in self.per_run} | self.warm.sandboxes()
        lookup = self.runtime.hooks.task_fixture
        task_fixture = await lookup(self.runtime, run_id) if lookup and run_id else None
        try:
            return await anyio.to_thread.run_sync(
                lambda: create_sandbox(
                    settings, run_id or "shared", name, upstream.fixture, active, task_fixture
                )
            )
        except (ConfigError, OSError) as exc:
            raise _SandboxError(str(exc)) from exc

    async def _never_started(self, slot: Slot, reason: str, message: str) -> None:
        """A per-run upstream that never started: the infrastructure's failure, not the
        agent's. Recorded in the database before the agent gets the error, so whichever process
        finishes the run (or closes its lost attempt) ends it with this reason, unscored."""
        run = slot.run
        if run is None or slot.started:
            return
        slot.never_started = (reason, message)
        store = self.runtime.store
        await anyio.to_thread.run_sync(
            lambda: infra_failures.record(store, run.id, slot.name, reason, message)
        )

    def new_process(self, launch: Launch) -> StdioProcess:
        """A process of `launch`, not yet spawned."""
        return StdioProcess(
            name=launch.name,
            command=launch.command,
            env=launch.env,
            cwd=launch.cwd,
            recorder=self.recorder,
            inject_traceparent=self.runtime.settings.recording.inject_traceparent,
        )

    async def _start(self, slot: Slot, exchange: Exchange) -> StdioProcess:
        run = slot.run
        try:
            launch = await self.resolve(slot.name, run.id if run is not None else None)
        except _SandboxError as exc:
            message = f"upstream {slot.name!r}: the run's sandbox could not be made: {exc}"
            await self._never_started(slot, "sandbox_failed", message)
            raise UpstreamError(message) from exc
        except (ConfigError, OSError) as exc:
            why = f"upstream {slot.name!r}: {exc}"
            await self._never_started(slot, "upstream_never_started", why)
            raise UpstreamError(f"upstream {slot.name!r}: {exc}") from exc
        if run is not None and launch.sandbox is not None and run.sandbox is None:
            run.sandbox = str(launch.sandbox)
            await anyio.to_thread.run_sync(
                lambda: self.runtime.store.update_run(run.id, sandbox=str(launch.sandbox))
            )
        # a run's first start takes a warm process of the same launch when there is one
        warm = await self.warm.take(launch, run) if run is not None else None
        process = warm or self.new_process(launch)
        process.on_exit = lambda p: self._exited(slot, p)
        process.listeners = slot.listeners
        process.client_capabilities = slot.client_capabilities
        try:
            await process.start(exchange, self.timeout(slot.name))
        except UpstreamError as exc:
            slot.crashes += 1
            slot.not_before = time.monotonic() + self._backoff(slot)
            slot.last_error = str(exc)
            await self._never_started(slot, "upstream_never_started", str(exc))
            log.error("%s", exc)
            raise
        slot.process = process
        slot.last_error = None
        if run is not None and slot.never_started is not None:  # it started after all
            store = self.runtime.store
            await anyio.to_thread.run_sync(lambda: infra_failures.clear(store, run.id, slot.name))
        slot.started, slot.never_started = True, None
        if run is not None:
            self.reaper.started(slot)
        log.info(
            "upstream %s started (pid %s%s): %s",
            slot.name,
            process.pid,
            ", warm" if warm else "",
            " ".join(launch.command),
        )
        return process

    @staticmethod
    def _backoff(slot: Slot) -> float:
        return float(min(MAX_BACKOFF_S, 0.25 * 2 ** max(slot.crashes - 1, 0)))

    def _exited(self, slot: Slot, process: StdioProcess) -> None:
        """The process died on its own: record the crash, schedule a restart (shared only)."""
        lived = (time.time_ns() - process.started_ns) / 1e9
        slot.crashes = slot.crashes + 1 if lived < QUICK_CRASH_S else 1
        slot.not_before = time.monotonic() + self._backoff(slot)
        message = f"upstream {slot.name!r} exited with code {process.exit_code}"
        log.error("%s; stderr tail:\n%s", message, process.stderr_tail())
        exchange = slot.last_exchange
        if exchange is not None:
            self._record_crash(exchange, process, message)
        if slot.process is process:
            slot.process = None
        if slot.run is None and not self.closed:
            slot.restart_task = asyncio.get_running_loop().create_task(self._restart(slot))

    def _record_crash(self, exchange: Exchange, process: StdioProcess, message: str) -> None:
        span = self.recorder.tracer.start_span(
            f"upstream exited {process.name}",
            context=exchange.run.context,
            kind=SpanKind.INTERNAL,
            attributes={
                semconv.RUN_ID: exchange.run.id,
                semconv.UPSTREAM: process.name,
                semconv.NETWORK_TRANSPORT: "pipe",
                semconv.ERROR_TYPE: semconv.ERR_UNAVAILABLE,
                EXIT_CODE_ATTRIBUTE: process.exit_code if process.exit_code is not None else -1,
                STDERR_ATTRIBUTE: process.stderr_tail(),
            },
        )
        span.set_status(Status(StatusCode.ERROR, message))
        span.end()

    async def _restart(self, slot: Slot) -> None:
        exchange = slot.last_exchange
        if exchange is None:
            return
        with contextlib.suppress(UpstreamError):
            await self.process_for(slot.name, exchange)

    async def recycle(self, name: str, run: RunInfo, process: StdioProcess) -> None:
        """After a hang: stop the process; a shared upstream starts again on the next call."""
        slot = self.slot(name, run)
        if slot.process is process:
            slot.process = None
        await process.stop(grace=0.5)
        if slot.run is None and not self.closed and slot.last_exchange is not None:
            slot.restart_task = asyncio.get_running_loop().create_task(self._restart(slot))

    async def stop_run(self, run_id: str) -> None:
        """Stop every per-run process of a run (its sandboxes stay)."""
        for key in [k for k in self.per_run if k[1] == run_id]:
            slot = self.per_run.pop(key)
            if slot.process is not None:
                await slot.process.stop()

    async def after_finish(self, _runtime: Runtime, run: RunRow) -> None:
        """`after_finish_hooks` entry: the run is over, its processes go."""
        await self.stop_run(run.id)

    async def close(self) -> None:
        """Stop every process (on shutdown)."""
        self.closed = True
        await self.reaper.close()
        await self.warm.close()
        slots = [*self.shared.values(), *self.per_run.values()]
        for slot in slots:
            if slot.restart_task is not None:
                slot.restart_task.cancel()
        await asyncio.gather(
            *(s.process.stop() for s in slots if s.process is not None), return_exceptions=True
        )
        self.shared.clear()
        self.per_run.clear()
        await self.warm.stop_preloads()  # after the per-run processes they serve

    def describe(self) -> dict[str, Any]:
        """Running processes, for diagnostics and tests."""
        return {
            "shared": {n: s.process.pid if s.process else None for n, s in self.shared.items()},
            "per_run": {
                f"{n}/{r}": s.process.pid if s.process else None
                for (n, r), s in self.per_run.items()
            },
        }
