"""Two `tracecard serve` on one fresh PostgreSQL database: migrations run one at a time."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from tests.support.processes import free_port
from tracecard.traces.migrate import MIGRATION_LOCK_KEY

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@contextlib.contextmanager
def _serving_both(pg_url: str) -> Iterator[list[int]]:
    ports = [free_port(), free_port()]
    with contextlib.ExitStack() as stack:
        for port in ports:
            # spawn() waits for the port: start both before waiting on either
            stack.enter_context(_spawn_later(pg_url, port))
        yield ports


@contextlib.contextmanager
def _spawn_later(pg_url: str, port: int) -> Iterator[None]:
    args = [sys.executable, "-m", "tracecard.server.cli", "serve", "--db", pg_url]
    proc = subprocess.Popen(
        [*args, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert b"UniqueViolation" not in err, err.decode(errors="replace")[-2000:]


def _healthy(port: int, timeout: float = 45.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            if response.status_code == 200:
                return dict(response.json())
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"tracecard on port {port} never answered /healthz")
        time.sleep(0.1)


def _wait_for_waiters(conn: psycopg.Connection[tuple[int]], count: int) -> None:
    """Until `count` sessions wait for the migration lock (or fail after 45 s)."""
    query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    deadline = time.monotonic() + 45
    while (row := conn.execute(query).fetchone()) is None or row[0] < count:
        assert time.monotonic() < deadline, f"{row} sessions wait for the lock, not {count}"
        time.sleep(0.1)


def _tables(pg_url: str) -> set[str]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in rows}


def test_servers_wait_for_the_migration_lock_then_both_start(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        with _serving_both(pg_url) as ports:
            _wait_for_waiters(holder, 2)
            assert _tables(pg_url) == set()  # neither migrated while the lock was held
            for port in ports:
                with pytest.raises(httpx.HTTPError):
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
            for port in ports:
                assert _healthy(port)["status"] == "ok"
    assert {"alembic_version", "spans", "runs"} <= _tables(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_two_servers_started_together_on_a_fresh_database(pg_url: str) -> None:
    with _serving_both(pg_url) as ports:
        for port in ports:
            assert _healthy(port)["status"] == "ok"
