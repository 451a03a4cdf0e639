"""A durable spool of spans not yet stored: JSON-lines files, appended per batch.

A batch is written to the operating system before `log` returns, so a process killed at any
point (SIGKILL included) leaves it for the next one. Whether it is also fsync'd (kept across a
power loss or a kernel crash) is the caller's choice (`Spool(path, fsync=...)`): the server
matches the database behind it (`server/runtime.py`, docs/configuration.md).

Two kinds of file live side by side:
- the shared file (`spans.jsonl`), which any process appends to under a lock file: `tracecard
  wrap` spools there what the server did not take;
- a process's own segments (`spans.<pid>-<random>.<n>.jsonl`): the server's write-ahead log.
  A batch is logged before it is written to the database and released once it is; the
  process holds an exclusive `flock` on each segment for as long as it lives, so when it dies
  (even by SIGKILL) the kernel drops the lock and any other process may deliver what was left.

`deliver` sends, oldest first, every file nobody holds: the shared file and dead processes'
segments. Sends must be idempotent (the database skips a span id it already has): a crash
between a send and the file's removal sends those spans again, which is harmless.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from tracecard.traces.engine import json_text

SpanDict = dict[str, Any]
BATCH = 512
SEGMENT_BYTES = 1 << 20  # a fully stored segment larger than this is removed and a new one begun
# A segment is created as `<name>.new` and renamed once locked, microseconds later; one older
# than this whose lock is free was left by a process that died in between (empty: nothing is
# logged into a segment before its rename), and delivery removes it.
UNSEEN_STALE_S = 60.0


def _lines(spans: list[SpanDict]) -> bytes:
    return "".join(json_text(s) + "\n" for s in spans).encode()


def _read(handle: IO[bytes]) -> list[SpanDict]:
    """The spans of a spool file; a line cut by a crash mid-write is skipped."""
    handle.seek(0)
    spans = []
    for line in handle.read().splitlines():
        if line.strip():
            with contextlib.suppress(orjson.JSONDecodeError):
                spans.append(orjson.loads(line))
    return spans


def _sync(handle: IO[bytes]) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def spool_for(db_url: str, directory: str | None = None) -> Path:
    """The server's spool file for a database: in `directory` when given, else beside a SQLite
    file (`tracecard.db.spool/`), else under `.tracecard/spool/<hash of the URL>/`."""
    if directory:
        return Path(directory) / "spans.jsonl"
    if db_url.startswith("sqlite:///") and db_url != "sqlite:///:memory:":
        return Path(db_url.removeprefix("sqlite:///") + ".spool") / "spans.jsonl"
    digest = hashlib.sha256(db_url.encode()).hexdigest()[:16]
    return Path(".tracecard") / "spool" / digest / "spans.jsonl"


class Spool:
    """Spans on disk until they are stored; see the module docstring."""

    def __init__(self, path: Path, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync  # the process's segments; the shared file is always fsync'd
        self.lock_path = path.with_name(path.name + ".lock")
        self._stem = path.name.removesuffix(".jsonl")
        self._mutex = threading.Lock()  # own segments: logged by one thread, released by another
        self._segments: dict[int, tuple[IO[bytes], Path]] = {}
        self._outstanding: dict[int, int] = {}
        self._current: int | None = None
        self._next = 0
        self._owner = f"{os.getpid()}-{secrets.token_hex(4)}"  # two spools in one process differ

    # --- the shared file ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def append(self, spans: list[SpanDict]) -> None:
        """Add spans to the shared file (fsync'd before returning)."""
        with self._locked(), open(self.path, "ab") as out:
            out.write(_lines(spans))
            _sync(out)

    # --- a process's write-ahead log ------------------------------------------------------------
    def log(self, spans: list[SpanDict]) -> int:
        """Write spans to this process's current segment (fsync'd if the spool was made so);
        returns the segment to `release` once they are stored."""
        with self._mutex:
            if self._current is None:
                self._current = self._open_segment()
            handle, _ = self._segments[self._current]
            handle.write(_lines(spans))
            if self.fsync:
                _sync(handle)
            else:
                handle.flush()  # in the kernel's page cache: a SIGKILL cannot lose it
            self._outstanding[self._current] += 1
            return self._current

    def release(self, segment: int) -> None:
        """One batch logged to `segment` is stored; a segment with none left outstanding is
        removed once it is no longer current (or has grown past `SEGMENT_BYTES`)."""
        with self._mutex:
            self._outstanding[segment] -= 1
            if self._outstanding[segment]:
                return
            handle, path = self._segments[segment]
            if segment == self._current:
                if handle.tell() < SEGMENT_BYTES:
                    return
                self._current = None
            del self._segments[segment], self._outstanding[segment]
            path.unlink(missing_ok=True)
            handle.close()  # after the unlink: nobody can take the lock of a stored segment

    def close(self) -> None:
        """Let go of this process's segments; what they still hold is delivered later."""
        with self._mutex:
            for segment, (handle, path) in list(self._segments.items()):
                if not self._outstanding[segment]:
                    path.unlink(missing_ok=True)
                handle.close()
            self._segments.clear()
            self._outstanding.clear()
            self._current = None

    def _open_segment(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        segment = self._next
        self._next += 1
        path = self.path.with_name(f"{self._stem}.{self._owner}.{segment}.jsonl")
        # locked under a name `deliver` does not look at, then renamed: under its own name the
        # segment is never unlocked, so another process's delivery (or this one's writer, at
        # its start) cannot take it for a dead process's, empty, and remove it between the
        # open and the lock, leaving this process to log into a file no one can deliver
        unseen = path.with_name(path.name + ".new")
        handle = open(unseen, "ab")  # noqa: SIM115 - held open (and locked) until released
        fcntl.flock(handle, fcntl.LOCK_EX)
        os.rename(unseen, path)
        self._segments[segment] = (handle, path)
        self._outstanding[segment] = 0
        return segment

    # --- delivery -------------------------------------------------------------------------------
    def _orphans(self) -> list[Path]:
        """Segments of processes that no longer hold them, oldest first."""
        found = self.path.parent.glob(f"{self._stem}.*.*.jsonl")
        return sorted(found, key=lambda p: (p.stat().st_mtime if p.exists() else 0, p.name))

    def pending(self) -> bool:
        """Whether anything waits for delivery (the shared file or any segment on disk)."""
        with contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_size > 0:
                return True
        return any(p.stat().st_size > 0 for p in self._orphans() if p.exists())

    def _sweep_unseen(self) -> None:
        """Remove the `.new` files of processes that died between a segment's creation and its
        rename: old, unlocked and empty (one with bytes, which no process writes, is given its
        segment name instead, to be delivered)."""
        stale = time.time() - UNSEEN_STALE_S
        for path in self.path.parent.glob(f"{self._stem}.*.*.jsonl.new"):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime > stale:
                    continue  # (a live process renames its own within microseconds)
            handle = _unheld(path)
            if handle is None:
                continue
            with handle:
                if os.fstat(handle.fileno()).st_size:
                    os.rename(path, path.with_suffix(""))
                else:
                    path.unlink(missing_ok=True)

    def deliver(self, send: Callable[[list[SpanDict]], bool]) -> int:
        """Send what nobody holds with `send(batch) -> bool`, oldest first; keep what did not
        go. Returns how many spans were sent."""
        self._sweep_unseen()
        sent = 0
        for path in self._orphans():
            handle = _unheld(path)
            if handle is None:
                continue  # gone, or a live process holds it
            with handle:
                done, rest = _send_all(_read(handle), send)
                sent += done
                if not rest:
                    path.unlink(missing_ok=True)
                    continue
                handle.seek(0)
                handle.truncate()
                handle.write(_lines(rest))
                _sync(handle)
            return sent  # a send failed: the rest waits for the next delivery
        if self.pending():
            with self._locked():
                try:
                    with open(self.path, "rb") as shared:
                        spans = _read(shared)
                except FileNotFoundError:
                    return sent
                done, rest = _send_all(spans, send)
                sent += done
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_bytes(_lines(rest))
                os.replace(tmp, self.path)
        return sent


def _unheld(path: Path) -> IO[bytes] | None:
    """`path` opened for update and locked, if it exists and no live process holds it."""
    try:
        handle = open(path, "r+b")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _send_all(
    spans: list[SpanDict], send: Callable[[list[SpanDict]], bool]
) -> tuple[int, list[SpanDict]]:
    """Send in batches until one fails: (spans sent, spans left)."""
    sent = 0
    for start in range(0, len(spans), BATCH):
        if not send(spans[start : start + BATCH]):
            break
        sent = min(start + BATCH, len(spans))
    return sent, spans[sent:]
