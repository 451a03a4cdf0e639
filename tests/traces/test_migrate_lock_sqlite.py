"""Two `tracecard serve` on one fresh SQLite file: migrations run one at a time.

SQLite has no advisory lock; tracecard takes an exclusive file lock beside the database
(`<db>.migrate.lock`, `flock`) for the migration. The test holds that lock itself, starts two
real servers, sees that neither migrates while it is held, then lets go: both start, the
schema is at head once.
"""

from __future__ import annotations

import contextlib
import fcntl
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import free_port
from tracecard.traces.migrate import migration_lock_path

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def _serving_both(db: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two servers started at once on `db` (neither waited for before the other starts)."""
    procs = []
    try:
        for _ in range(2):
            args = [sys.executable, "-m", "tracecard.server.cli", "serve", "--db", str(db)]
            procs.append(
                subprocess.Popen(
                    [*args, "--port", str(free_port())],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            )
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            _, err = proc.communicate(timeout=30)
            text = err.decode(errors="replace")
            assert "Traceback" not in text and "already exists" not in text, text[-2000:]


def _port(proc: subprocess.Popen[bytes]) -> int:
    args = proc.args
    assert isinstance(args, list)
    return int(args[args.index("--port") + 1])


def _healthy(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"tracecard exited with {proc.returncode}"
        try:
            response = httpx.get(f"http://127.0.0.1:{_port(proc)}/healthz", timeout=2)
            if response.status_code == 200:
                return dict(response.json())
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "tracecard never answered /healthz"
        time.sleep(0.1)


def _wait_for_waiters(lock: Path, count: int) -> None:
    """Until `count` processes block on the lock file's flock (/proc/locks), or 45 s."""
    inode = f":{lock.stat().st_ino} "
    deadline = time.monotonic() + 45
    while True:
        lines = Path("/proc/locks").read_text().splitlines()
        waiting = [line for line in lines if "->" in line and inode in line]
        if len(waiting) >= count:
            return
        assert time.monotonic() < deadline, f"{len(waiting)} processes wait, not {count}"
        time.sleep(0.1)


def _tables(db: Path) -> set[str]:
    if not db.exists():
        return set()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _versions(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]


def test_servers_wait_for_the_migration_lock_then_both_start(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    lock = migration_lock_path(db)
    with open(lock, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with _serving_both(db) as procs:
            _wait_for_waiters(lock, 2)
            assert "alembic_version" not in _tables(db)  # neither migrated while it was held
            assert all(proc.poll() is None for proc in procs)  # waiting, not failed
            fcntl.flock(held, fcntl.LOCK_UN)
            for proc in procs:
                assert _healthy(proc)["status"] == "ok"
    assert {"alembic_version", "spans", "runs"} <= _tables(db) and len(_versions(db)) == 1


def test_two_servers_started_together_on_a_fresh_file(tmp_path: Path) -> None:
    for round_ in range(3):  # the race, when there was one, lost in about one round of three
        db = tmp_path / f"fresh-{round_}.db"
        with _serving_both(db) as procs:
            for proc in procs:
                assert _healthy(proc)["status"] == "ok"
        assert len(_versions(db)) == 1
