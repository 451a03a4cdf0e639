"""Shared fixtures: databases (real SQLite, real PostgreSQL), settings, a running tracecard."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracecard.server.settings import Settings
from tracecard.traces.store import Store

PG_URL = os.environ.get("TRACECARD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_admin_connect():  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)


def pg_available() -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        with _pg_admin_connect():
            return None
    except Exception as exc:  # noqa: BLE001 - any failure means "skip with the reason"
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database, dropped afterwards."""
    reason = pg_available()
    if reason is not None:
        pytest.skip(
            f"PostgreSQL not reachable at {PG_URL} ({reason}); start it or set TRACECARD_TEST_PG"
        )
    name = f"tc_{secrets.token_hex(6)}"
    with _pg_admin_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with _pg_admin_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each storage test runs on real SQLite and on real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tracecard.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    store = Store(db_url)
    store.create_schema()
    yield store
    store.dispose()


@pytest.fixture
def memory_store() -> Iterator[Store]:
    """The store's in-memory double (`sqlite://`) for unit tests: the real schema and queries,
    no file, one database shared by every thread."""
    store = Store("sqlite://")
    store.create_schema()
    yield store
    store.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tracecard.db'}"


@pytest.fixture
def settings(sqlite_url: str, tmp_path: Path) -> Settings:
    """Default settings on a fresh SQLite file, with a short batch delay for tests."""
    return Settings(
        db=sqlite_url,
        sandbox_root=str(tmp_path / "sandboxes"),
        recording={"batch_delay_ms": 50},
    )


# The slowest files start first: scripts/test runs two workers, one file each at a time, and a
# long file that starts last is a tail with one core idle. Measured with --durations (2026-12-03).
SLOW_FIRST = (
    "tests/test_fresh_clone.py",
    "tests/server/test_conformance.py",
    "tests/server/test_workers.py",
    "tests/test_package.py",
    "tests/server/test_demo.py",
    "tests/test_quickstart_walkthrough.py",
    "tests/server/test_run_cli.py",
    "tests/server/test_audit.py",
    "tests/server/test_demo_process.py",
    "tests/viewer/test_csp_browser.py",
    "tests/server/test_jobs_infra.py",
    "tests/server/test_jobs_infra_record.py",
    "tests/server/test_jobs_backoff.py",
    "tests/server/test_jobs_cancel.py",
    "tests/viewer/test_robustness_browser.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOW_FIRST)}
    # a stable sort by file: every other file keeps its place, a file's tests stay together
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
