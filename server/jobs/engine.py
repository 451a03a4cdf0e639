"""DBOS, the durable-job engine under tracecard's cells (docs/workers.md): one DBOS instance per
process, launched here, with its state in tracecard's database.

Where DBOS keeps its state (decided here, documented in docs/workers.md):
- PostgreSQL: the same database as tracecard, in DBOS's own schema `dbos` (no second database
  to create or back up; a team's workers need only `--db`).
- SQLite: a sibling file, `<tracecard db>.jobs.sqlite`. tracecard keeps one writer connection
  to its SQLite file; DBOS checkpoints from its own threads would queue behind span writes on
  the same file lock, so they get a file of their own.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

__all__ = [
    "APP_NAME",
    "JOBS_VERSION",
    "QUEUE",
    "executor_id",
    "launch",
    "launched_url",
    "poll_interval",
    "queue_health",
    "shutdown",
    "system_database_url",
]

APP_NAME = "tracecard"
# Every process that enqueues or runs cells must agree on it: DBOS only dequeues and recovers
# workflows of its own application version. Bump it when the cell workflow's steps change.
JOBS_VERSION = "tracecard-cells-1"
QUEUE = "tracecard-cells"
# DBOS's queues poll (1 s by default): 30 trivial cells took 17 s at 1 s and 2.2-2.5 s at 50 ms
# (docs/PERFORMANCE.md); TRACECARD_JOBS_POLL_S changes it.
DEFAULT_POLL_S = 0.05

_lock = threading.Lock()
_state: dict[str, Any] = {"url": None, "executor": None}


def poll_interval() -> float:
    """How often a worker looks for queued cells, in seconds."""
    return float(os.environ.get("TRACECARD_JOBS_POLL_S", DEFAULT_POLL_S))


def system_database_url(db_url: str) -> str:
    """DBOS's system database for tracecard's `db_url` (see the module's docstring)."""
    url = make_url(db_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:":
            raise ValueError("durable jobs need a database file, not an in-memory SQLite")
        return f"sqlite:///{Path(database).resolve()}.jobs.sqlite"
    if backend == "postgresql":  # DBOS's driver is psycopg 3, whatever tracecard's URL names
        return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    raise ValueError(f"durable jobs support SQLite and PostgreSQL, not {backend}")


def executor_id(kind: str) -> str:
    """A fresh executor id: DBOS tags each workflow with the executor running it, and a worker
    recovers a dead one's workflows by this id."""
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def launched_url() -> str | None:
    """The system database DBOS runs on in this process, or None."""
    url: str | None = _state["url"]
    return url


def _console_to_current_stderr() -> None:
    """DBOS's console log handler keeps the `sys.stderr` of the process's first launch, and
    each launch flushes it: once that stream is closed (a test's captured stderr, an embedding
    app's swapped stream), every later launch failed with "I/O operation on closed file"."""
    for handler in logging.getLogger("dbos").handlers:
        ours = handler.name == "__dbos_console_log_handler__"  # dbos/_logger.py's own
        if ours and isinstance(handler, logging.StreamHandler) and handler.stream is not sys.stderr:
            with handler.lock or threading.RLock():
                handler.stream = sys.stderr  # not setStream: it flushes the old stream first


def launch(
    system_url: str,
    executor: str,
    *,
    listen: list[str] | None = None,
    queues: dict[str, dict[str, Any]] | None = None,
    pool_size: int = 8,
) -> None:
    """Launch DBOS in this process (once; a launch on another database replaces it). `listen`:
    the queues this process dequeues from (None: none, it runs cells itself); `queues`: queue
    name -> `register_queue` options (concurrency and rate limits, stored in the database)."""
    from dbos import DBOS

    import tracecard.server.jobs.cell  # noqa: F401  (registers the workflow before launch)

    with _lock:
        if _state["url"] == system_url and _state["executor"] == executor:
            return
        if _state["url"] is not None:
            _destroy()
        _console_to_current_stderr()
        url = make_url(system_url)
        if url.get_backend_name() == "sqlite" and url.database:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        DBOS(
            config={
                "name": APP_NAME,
                "system_database_url": system_url,
                "executor_id": executor,
                "application_version": JOBS_VERSION,
                "log_level": os.environ.get("TRACECARD_JOBS_LOG_LEVEL", "WARNING"),
                "enable_otlp": False,
                # DBOS's default pool is 20 connections per process: ten workers and a few
                # replicas would exhaust a default PostgreSQL (max_connections = 100)
                "sys_db_pool_size": pool_size,
                "notification_listener_polling_interval_sec": poll_interval(),
            }
        )
        DBOS.listen_queues(listen or [])
        DBOS.launch()
        for name, options in (queues or {}).items():
            DBOS.register_queue(
                name, polling_interval_sec=poll_interval(), on_conflict="always_update", **options
            )
        _state["url"], _state["executor"] = system_url, executor


def queue_health() -> dict[str, Any] | None:
    """For `/healthz` of a process that runs cells: its executor and the cells waiting in the
    queues (ENQUEUED) and taken (PENDING), across workers; None when DBOS does not run here."""
    if _state["url"] is None:
        return None
    from dbos import DBOS

    waiting = DBOS.list_queued_workflows(
        name="tracecard.cell", status=["ENQUEUED", "PENDING"], load_input=False,
        load_output=False,
    )  # fmt: skip
    queued = sum(1 for w in waiting if w.status == "ENQUEUED")
    return {
        "executor": _state["executor"],
        "queue_depth": queued,
        "taken": len(waiting) - queued,
    }


def _destroy() -> None:
    from dbos import DBOS

    DBOS.destroy(workflow_completion_timeout_sec=0)
    _state["url"] = _state["executor"] = None


def shutdown() -> None:
    """Stop DBOS in this process (its pending workflows stay pending, to be recovered)."""
    with _lock:
        if _state["url"] is not None:
            _destroy()


atexit.register(shutdown)
