"""Warm per-run processes: a run's stdio server started before the run needs it.

A `per_run` upstream's process costs its start-up (an interpreter and its imports, `npx`…) on
the run's first call. The pool looks ahead: when a run of an experiment starts its process, the
next pending runs of that experiment get theirs spawned in the background (at most `[pool] size`
waiting in all), so they take a warm one. What makes two processes interchangeable is what they
were started with: the command, environment and working directory after `{task.NAME}` and
`{sandbox}` are filled in (a `Launch`); a run takes only a process of its own launch. Where the
sandbox's path is part of the launch, the sandbox is the pending run's own (`<run_id>-<name>`),
created fresh when its process is spawned.

Exact: a waiting process has been spawned and told nothing (no handshake; its stdout is not read),
so it is in the state a process started at the run's first call reaches before its first
message; the handshake that declares the run's agent's capabilities is sent when a run takes it.
A process that served a run is never handed out again (it leaves the pool when taken); one that
died while waiting is dropped, never handed out, and its sandbox with it. `[pool] enabled = false`
starts every process cold. Shutdown stops every waiting process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread
from sqlmodel import col, select

from tracecard.server.runs.registry import RunInfo
from tracecard.server.settings import ConfigError
from tracecard.server.stdio.messages import UpstreamError
from tracecard.server.stdio.preload import Preloads
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store

if TYPE_CHECKING:
    from tracecard.server.stdio.pool import StdioUpstreams
    from tracecard.server.stdio.process import StdioProcess

log = logging.getLogger(__name__)

STALE_S = 120.0  # a waiting process no run has taken for this long is stopped


@dataclass(frozen=True)
class Launch:
    """What a stdio process is started with; two processes of equal launches are alike."""

    name: str
    command: list[str]
    env: dict[str, str]
    cwd: str | None
    sandbox: Path | None = None

    @property
    def key(self) -> tuple[object, ...]:
        return (self.name, tuple(self.command), tuple(sorted(self.env.items())), self.cwd)


@dataclass
class _Waiting:
    launch: Launch
    experiment_id: str
    run_id: str  # the pending run it was started for (its sandbox, if any, is that run's)
    process: StdioProcess
    spawned: asyncio.Task[bool]
    since: float = field(default_factory=time.monotonic)
    watcher: asyncio.Task[None] | None = None


def pending_runs(store: Store, experiment_id: str, limit: int) -> list[str]:
    """The ids of an experiment's runs not finished yet, in the order they were created."""
    query = (
        select(RunRow.id)
        .where(RunRow.experiment_id == experiment_id, RunRow.status == "pending")
        .order_by(col(RunRow.created_at), col(RunRow.id))
        .limit(limit)
    )
    with store.session() as session:
        return list(session.exec(query).all())


class WarmPool:
    """Processes spawned ahead of the runs that will take them (see the module's docstring)."""

    def __init__(self, upstreams: StdioUpstreams) -> None:
        self.upstreams = upstreams
        self.settings = upstreams.runtime.settings.pool
        self.waiting: list[_Waiting] = []
        self.preloads = Preloads(upstreams.runtime)
        self.closed = False
        self._wanted: dict[tuple[str, str], None] = {}  # (upstream, experiment) to look ahead for
        self._refill_task: asyncio.Task[None] | None = None
        self.lookaheads = 0  # runs that made the pool look ahead (diagnostics and tests)
        self.spawned = 0  # processes spawned ahead
        self.taken = 0

    @property
    def enabled(self) -> bool:
        return self.settings.enabled and self.settings.size > 0

    async def preload_env(self, name: str) -> dict[str, str]:
        """What a process of upstream `name` is told about its `preload` helper (if running)."""
        if not self.settings.enabled:
            return {}
        return await self.preloads.env(name)

    def sandboxes(self) -> set[str]:
        """Names of the sandboxes waiting processes run in (kept when old ones are pruned)."""
        return {w.launch.sandbox.name for w in self.waiting if w.launch.sandbox is not None}

    async def take(self, launch: Launch, run: RunInfo) -> StdioProcess | None:
        """A waiting process of `launch` for `run` (it leaves the pool), or None; either way the
        pool then looks ahead to the run's experiment's next runs."""
        if not self.enabled or self.closed:
            return None
        if run.experiment_id is not None:
            self.lookaheads += 1
            self._wanted[(launch.name, run.experiment_id)] = None
            if self._refill_task is None or self._refill_task.done():
                self._refill_task = asyncio.get_running_loop().create_task(self._refill_all())
        for entry in [w for w in self.waiting if w.launch.key == launch.key]:
            if entry not in self.waiting:  # taken or dropped while an earlier one was checked
                continue
            self.waiting.remove(entry)
            if await entry.spawned and entry.process.running:
                if entry.watcher is not None:
                    entry.watcher.cancel()
                entry.process.warm = True
                self.taken += 1
                return entry.process
            await self._discard(entry, "it exited while waiting")
        return None

    # --- looking ahead --------------------------------------------------------------------------
    async def _refill_all(self) -> None:
        while self._wanted and not self.closed:
            name, experiment_id = next(iter(self._wanted))
            del self._wanted[(name, experiment_id)]
            try:
                await self._refill(name, experiment_id)
            except Exception:  # a look-ahead that failed costs speed, never a run
                log.exception("warm pool: looking ahead for upstream %s failed", name)

    async def _refill(self, name: str, experiment_id: str) -> None:
        size = self.settings.size
        store = self.upstreams.runtime.store
        candidates = await anyio.to_thread.run_sync(
            lambda: pending_runs(store, experiment_id, size + len(self.upstreams.per_run))
        )
        upcoming = [r for r in candidates if (name, r) not in self.upstreams.per_run][:size]
        mine = [w for w in self.waiting if w.launch.name == name]
        keep: list[_Waiting] = []
        to_spawn: list[tuple[Launch, str]] = []
        for run_id in upcoming:
            match = next(
                (w for w in mine if w not in keep and w.run_id == run_id),
                None,
            )
            if match is not None:
                keep.append(match)
                continue
            try:
                launch = await self.upstreams.resolve(name, run_id, sandbox=False)
            except (ConfigError, OSError) as exc:  # the run's own start will say so
                log.info("warm pool: not starting %s for run %s ahead: %s", name, run_id, exc)
                continue
            to_spawn.append((launch, run_id))
        now = time.monotonic()
        unneeded = [  # left behind by this experiment, or by any long ago
            w
            for w in self.waiting
            if (w in mine and w not in keep and w.experiment_id == experiment_id)
            or now - w.since > STALE_S
        ]
        self.waiting = [w for w in self.waiting if w not in unneeded]  # before any await
        for entry in unneeded:
            await self._discard(entry, "no pending run needs it")
        for launch, run_id in to_spawn:
            if len(self.waiting) >= size or self.closed:
                break
            self._spawn(launch, experiment_id, run_id)

    def _spawn(self, launch: Launch, experiment_id: str, run_id: str) -> None:
        process = self.upstreams.new_process(launch)
        loop = asyncio.get_running_loop()
        spawned = loop.create_task(process_spawn(process))
        entry = _Waiting(launch, experiment_id, run_id, process, spawned)
        entry.watcher = loop.create_task(self._watch(entry))
        self.waiting.append(entry)
        self.spawned += 1

    async def _watch(self, entry: _Waiting) -> None:
        """A waiting process that exits is dropped (and replaced at the next look-ahead)."""
        if not await entry.spawned:
            code = None
        else:
            code = await entry.process.wait()
        if entry in self.waiting:
            self.waiting.remove(entry)
            log.warning(
                "warm pool: upstream %s (pid %s) exited with code %s while waiting; stderr: %s",
                entry.launch.name,
                entry.process.pid,
                code,
                entry.process.stderr_tail()[-500:],
            )
            await self._discard(entry, "it exited while waiting", watched=True)
            self._wanted[(entry.launch.name, entry.experiment_id)] = None
            if not self.closed and (self._refill_task is None or self._refill_task.done()):
                self._refill_task = asyncio.get_running_loop().create_task(self._refill_all())

    async def _discard(self, entry: _Waiting, why: str, watched: bool = False) -> None:
        """Stop a process no run took; its sandbox (made for it alone) goes too."""
        if entry.watcher is not None and not watched:
            entry.watcher.cancel()
        log.info("warm pool: stopping %s (pid %s): %s", entry.launch.name, entry.process.pid, why)
        with contextlib.suppress(Exception):
            await entry.spawned
        await entry.process.stop(grace=0.5)
        sandbox = entry.launch.sandbox
        if sandbox is None or (entry.launch.name, entry.run_id) in self.upstreams.per_run:
            return  # none, or its run started with it after all
        store = self.upstreams.runtime.store
        row = await anyio.to_thread.run_sync(lambda: store.get_run(entry.run_id))
        if row is not None and row.status == "pending" and row.sandbox != str(sandbox):
            # made for this process alone: the run, when it starts, gets a fresh copy
            marker = sandbox.parent / ".created" / sandbox.name
            await anyio.to_thread.run_sync(lambda: _remove(sandbox, marker))

    async def close(self) -> None:
        """Stop looking ahead and stop every waiting process."""
        self.closed = True
        if self._refill_task is not None:
            self._refill_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._refill_task
        waiting, self.waiting = self.waiting, []
        await asyncio.gather(
            *(self._discard(w, "tracecard is shutting down") for w in waiting),
            return_exceptions=True,
        )

    async def stop_preloads(self) -> None:
        await self.preloads.stop()

    def describe(self) -> dict[str, object]:
        """Waiting processes by upstream and run, for diagnostics and tests."""
        return {
            "waiting": [
                {"upstream": w.launch.name, "run": w.run_id, "pid": w.process.pid}
                for w in self.waiting
            ],
            "lookaheads": self.lookaheads,
            "spawned": self.spawned,
            "taken": self.taken,
        }


async def process_spawn(process: StdioProcess) -> bool:
    """Spawn a waiting process; False (logged) when its command cannot start."""
    try:
        await process.spawn()
    except UpstreamError as exc:
        log.warning("warm pool: %s", exc)
        return False
    return True


def _remove(sandbox: Path, marker: Path) -> None:
    shutil.rmtree(sandbox, ignore_errors=True)
    marker.unlink(missing_ok=True)
