"""`preload` helpers: one process per upstream that has imported what the upstream's per-run
processes need, and forks one for each of them (the BFCL server: server/bfcl/prefork.py).

tracecard starts an upstream's helper before its first per-run process, with `{preload}` in its
command replaced by a Unix socket path, and waits for it to print `ready`. Each per-run process
is then started with `TRACECARD_PRELOAD` set to that path; it hands its stdio to the helper,
which forks the server onto it. A helper that fails to start, or dies, leaves the variable
unset, and the per-run command starts cold (the BFCL relay runs the server itself): a helper
costs speed when it fails, never a run. Helpers stop after the per-run processes, on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from tracecard.server.runs.sandbox import needs_sandbox, uses_task_params
from tracecard.server.runtime import Runtime

log = logging.getLogger(__name__)

PRELOAD_VARIABLE = "TRACECARD_PRELOAD"
PLACEHOLDER = "{preload}"
READY_TIMEOUT_S = 60.0  # importing can be slow on a loaded machine
RETRY_S = 30.0  # after a failed start, per-run processes start cold this long before a retry


@dataclass
class _Helper:
    socket: Path
    process: asyncio.subprocess.Process | None = None
    ready: bool = False  # it said `ready`: its socket listens
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    not_before: float = 0.0
    stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=16))
    drain: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """It said `ready` and has not exited since."""
        return self.ready and self.process is not None and self.process.returncode is None


class Preloads:
    """The running `preload` helpers, by upstream."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.helpers: dict[str, _Helper] = {}
        self._folder: Path | None = None
        self.closed = False

    async def env(self, name: str) -> dict[str, str]:
        """`{TRACECARD_PRELOAD: socket}` while upstream `name`'s helper runs, else `{}`."""
        upstream = self.runtime.settings.upstreams[name]
        if upstream.preload is None or self.closed:
            return {}
        helper = self.helpers.get(name)
        if helper is None:
            if self._folder is None:  # short: a Unix socket path is limited to ~100 bytes
                self._folder = Path(tempfile.mkdtemp(prefix="tracecard-preload-"))
            helper = self.helpers[name] = _Helper(self._folder / f"{len(self.helpers)}.sock")
        if helper.running:
            return {PRELOAD_VARIABLE: str(helper.socket)}
        # a start still importing: wait for its `ready` (a socket path handed out before it
        # listens sent each early relay to a cold start: 7 of a 20-run experiment's first runs)
        async with helper.lock:
            running: bool = helper.running
            if not running and time.monotonic() >= helper.not_before and not self.closed:
                running = await self._start(name, helper, upstream.preload, upstream.env)
        return {PRELOAD_VARIABLE: str(helper.socket)} if running else {}

    async def _start(
        self, name: str, helper: _Helper, command: list[str], env: dict[str, str]
    ) -> bool:
        if helper.process is not None:
            log.warning("preload of upstream %s exited (%s): starting it again", name,
                        helper.process.returncode)  # fmt: skip
        helper.ready = False
        helper.socket.unlink(missing_ok=True)
        argv = [part.replace(PLACEHOLDER, str(helper.socket)) for part in command]
        # the helper shares what every run's process has; per-run values reach the forked
        # server from the per-run process itself
        fixed = {k: v for k, v in env.items() if not needs_sandbox([], {k: v}, None)}
        fixed = {k: v for k, v in fixed.items() if not uses_task_params([], {k: v}, None)}
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **fixed},
                start_new_session=True,
            )
        except OSError as exc:
            return self._failed(name, helper, f"cannot start {argv[0]!r}: {exc}")
        helper.process = process
        helper.drain = asyncio.get_running_loop().create_task(_drain(process, helper.stderr))
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)
        except TimeoutError:
            line = b""
        if line.strip() != b"ready":
            await _stop(process)
            tail = b"".join(helper.stderr).decode("utf-8", "replace").strip()[-1000:]
            return self._failed(name, helper, f"did not say ready (stderr: {tail or 'empty'})")
        helper.ready = True
        log.info("preload of upstream %s ready (pid %s): %s", name, process.pid, " ".join(argv))
        return True

    @staticmethod
    def _failed(name: str, helper: _Helper, why: str) -> bool:
        helper.not_before = time.monotonic() + RETRY_S
        log.error("preload of upstream %s %s; its runs start cold for %gs", name, why, RETRY_S)
        return False

    async def stop(self) -> None:
        """Stop every helper (after the per-run processes they forked)."""
        self.closed = True
        helpers = list(self.helpers.values())
        await asyncio.gather(
            *(_stop(h.process) for h in helpers if h.process is not None), return_exceptions=True
        )
        for helper in helpers:
            if helper.drain is not None:
                helper.drain.cancel()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def pids(self) -> dict[str, int | None]:
        """Helper pids by upstream, for diagnostics and tests."""
        return {
            name: h.process.pid if h.process is not None and h.process.returncode is None else None
            for name, h in self.helpers.items()
        }


async def _drain(process: asyncio.subprocess.Process, tail: deque[bytes]) -> None:
    assert process.stderr is not None
    while chunk := await process.stderr.read(4096):
        tail.append(chunk)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the helper's process group, SIGKILL it if it lingers."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), wait)
            return
        except TimeoutError:
            continue
