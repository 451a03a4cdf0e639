"""Run one agent command in its own process group: capped output, a timeout that stops the whole
group (SIGTERM, then SIGKILL after a grace period), and nothing left running afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ProcessResult",
    "TailBuffer",
    "exited",
    "group_members",
    "run_process",
    "stop_group",
]

READ_CHUNK = 64 * 1024


class TailBuffer:
    """Keeps the last `limit` bytes written to it, and counts them all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._data = bytearray()

    def write(self, chunk: bytes) -> None:
        """Append a chunk, dropping the oldest bytes beyond twice the limit (amortised)."""
        self.total += len(chunk)
        self._data.extend(chunk)
        if len(self._data) > 2 * self.limit:
            del self._data[: len(self._data) - self.limit]

    @property
    def truncated(self) -> bool:
        """Whether bytes were dropped from the front."""
        return self.total > self.limit

    def text(self) -> str:
        """The kept tail as text (invalid UTF-8 replaced)."""
        return bytes(self._data[-self.limit :]).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class ProcessResult:
    """How an agent process ended and what it wrote (tails only)."""

    exit_code: int | None  # None when it could not be started
    timed_out: bool
    start_error: str | None
    stdout_tail: str
    stderr_tail: str
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float
    signalled_group: bool  # we had to stop the process group (timeout, leftovers, cancel)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, read from /proc where there is one."""
    try:  # no process at all in the group (the usual end of a run): no /proc scan
        os.killpg(pgid, 0)  # (a scan reads every process's stat: ~10 ms on a busy machine)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    proc = Path("/proc")
    if not proc.is_dir():
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields start after the last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _load_prctl() -> Any:
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except OSError:
        return None


_PRCTL = _load_prctl()  # loaded here: nothing is imported between fork and exec
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent thread's process dies."""
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def exited(process: asyncio.subprocess.Process) -> int:
    """Wait for the process itself to exit. (`Process.wait()` also waits for its pipes to close,
    which a child it left behind may keep open.)"""
    delay = 0.005
    while process.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return process.returncode


async def stop_group(process: asyncio.subprocess.Process, pgid: int, grace_s: float) -> bool:
    """Stop every process of the group: SIGTERM, then SIGKILL after `grace_s`. Returns whether
    anything was still running."""
    if process.returncode is not None and not group_members(pgid):
        return False
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if process.returncode is not None and not group_members(pgid):
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exited(process), 0.05)
    _signal_group(pgid, signal.SIGKILL)
    await exited(process)
    deadline = time.monotonic() + 2.0
    while group_members(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return True


async def _uncancellable(cleanup: Coroutine[Any, Any, bool]) -> bool:
    """Run a (bounded) clean-up to its end even if we are cancelled again meanwhile; the
    cancellation is re-raised afterwards."""
    task = asyncio.ensure_future(cleanup)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result


async def _drain(stream: asyncio.StreamReader | None, sink: TailBuffer) -> None:
    if stream is None:
        return
    while chunk := await stream.read(READ_CHUNK):
        sink.write(chunk)


async def run_process(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | Path | None = None,
    timeout_s: float,
    grace_s: float = 5.0,
    stdout_limit: int = 64 * 1024,
    stderr_limit: int = 16 * 1024,
    on_start: asyncio.Future[int] | None = None,
    die_with_parent: bool = False,
) -> ProcessResult:
    """Run `argv` in a new session until it exits or `timeout_s` passes. When cancelled, the
    process group is stopped before the cancellation goes on. `die_with_parent` (Linux): the
    process gets SIGKILL when this one dies, even by `kill -9` (a worker's agents)."""
    started = time.monotonic()
    stdout, stderr = TailBuffer(stdout_limit), TailBuffer(stderr_limit)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: stopped as a whole
            limit=READ_CHUNK,
            preexec_fn=_die_with_parent if die_with_parent and _PRCTL is not None else None,
        )
    except OSError as exc:
        reason = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
        return ProcessResult(None, False, reason, "", "", 0, 0, time.monotonic() - started, False)
    pgid = process.pid
    if on_start is not None and not on_start.done():
        on_start.set_result(pgid)
    drains = [
        asyncio.create_task(_drain(process.stdout, stdout)),
        asyncio.create_task(_drain(process.stderr, stderr)),
    ]
    timed_out = False
    signalled = False
    try:
        try:
            await asyncio.wait_for(exited(process), timeout_s)
        except TimeoutError:
            timed_out = True
    finally:
        # on timeout, on cancellation (Ctrl-C) and after a normal exit (leftover children)
        signalled = await _uncancellable(stop_group(process, pgid, grace_s))
        _, pending = await asyncio.wait(drains, timeout=2.0)
        for task in pending:  # a process outside the group still holds the pipe
            task.cancel()
    return ProcessResult(
        exit_code=process.returncode,
        timed_out=timed_out,
        start_error=None,
        stdout_tail=stdout.text(),
        stderr_tail=stderr.text(),
        stdout_bytes=stdout.total,
        stderr_bytes=stderr.total,
        duration_s=time.monotonic() - started,
        signalled_group=signalled,
    )
