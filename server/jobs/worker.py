"""`tracecard worker`: take queued cells from the database and run their agents, here.

A worker is a whole tracecard (the same app as `tracecard serve`, on the same database, on a port
of its own) plus a DBOS executor: its cells' agents reach its proxy, so per-run tool processes
and sandboxes live on the machine that runs the agent. It beats in `job_workers`, recovers the
cells of workers that went silent, and on SIGTERM/Ctrl-C stops (its unfinished cells are then
recovered by another worker, each as a new attempt).
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Any

from tracecard.server.cli.common import UsageError, settings_from_args

__all__ = ["concurrency_note", "queue_names", "register"]


def queue_names(tags: list[str], limit_queues: list[str] | None = None) -> list[str]:
    """The queues a worker with these tags takes cells from."""
    from tracecard.server.jobs.engine import QUEUE

    bases = [QUEUE, *(limit_queues or [])]
    return [*bases, *(f"{base}@{tag}" for base in bases for tag in tags)]


def concurrency_note(mine: int, executor: str, workers: list[dict[str, Any]]) -> str | None:
    """What a worker says when live workers were started with another `--concurrency`: DBOS
    keeps one `worker_concurrency` per queue in the database, and this worker's start set it
    for all of them (docs/workers.md)."""
    others = sorted(
        {w["concurrency"] for w in workers if w["id"] != executor and not w["stopped"]
         and not w["recovered_by"] and w["concurrency"] != mine}
    )  # fmt: skip
    if not others:
        return None
    return (
        f"note: live workers were started with --concurrency {', '.join(map(str, others))}; "
        f"DBOS keeps one per-worker limit per queue in the database, so every worker now runs "
        f"up to {mine} cell(s) of each queue at a time (the last worker started sets it)"
    )


def _tags(text: str | None) -> list[str]:
    tags = [t.strip() for t in (text or "").split(",") if t.strip()]
    for tag in tags:
        if not tag.replace("-", "").replace("_", "").isalnum():
            raise UsageError(f"--tags: {tag!r} is not a tag (letters, digits, - and _)")
    return tags


def _worker(args: argparse.Namespace) -> int:
    from tracecard.client import TracecardClient
    from tracecard.server.jobs.cell import CellContext, contexts
    from tracecard.server.jobs.engine import executor_id, launch, system_database_url
    from tracecard.server.jobs.heartbeat import Heartbeat
    from tracecard.server.jobs.limits import limit_queues
    from tracecard.server.orchestration.embedded import embedded_server
    from tracecard.traces.engine import normalise_url
    from tracecard.traces.store import Store

    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    tags = _tags(args.tags)
    settings = settings_from_args(args, db=args.db, port=args.port)
    try:
        system_url = system_database_url(normalise_url(settings.db))
    except ValueError as exc:
        raise UsageError(f"--db: {exc}") from exc
    stop = threading.Event()

    def ask_stop(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, ask_stop)
    signal.signal(signal.SIGINT, ask_stop)
    executor = executor_id("worker")
    running = {"cells": 0}
    lock = threading.Lock()

    def started(_run: Any) -> None:
        with lock:
            running["cells"] += 1

    def ended(_run: Any, _outcome: Any) -> None:
        with lock:
            running["cells"] -= 1

    with (
        embedded_server(settings) as served,
        TracecardClient(served.base_url, token=served.api_token) as client,
    ):
        store = Store(settings.db)
        contexts["worker"] = CellContext(
            client=client,
            executor=executor,
            work_dir=Path(args.work_dir or Path(".tracecard") / "agent-runs").resolve(),
            token=served.api_token,
            on_started=started,
            on_agent_ended=ended,
        )
        limits = limit_queues(settings, args.concurrency)
        names = queue_names(tags, [n for n in limits if n != "tracecard-cells"])
        queues = {name: limits.get(name.split("@")[0], {}) for name in names}
        launch(
            system_url, executor, listen=names, queues=queues, pool_size=4 + 2 * args.concurrency
        )
        heartbeat = Heartbeat(
            store,
            executor,
            tags=tags,
            concurrency=args.concurrency,
            running=lambda: running["cells"],
            recover=_recover,
            interval_s=args.heartbeat,
            lost_after_s=args.lost_after,
        )
        heartbeat.start()
        from tracecard.traces.jobs import workers

        note = concurrency_note(args.concurrency, executor, workers(store))
        if note is not None:
            print(note, flush=True)
        print(
            f"tracecard worker {executor} on {served.base_url}: {args.concurrency} cell(s) "
            f"at a time from {', '.join(names)}",
            flush=True,
        )
        try:
            stop.wait()
        finally:
            heartbeat.stop()
            from tracecard.server.jobs.engine import shutdown

            shutdown()
            store.dispose()
    return 0


def _recover(executors: list[str]) -> int:
    """Put the pending cells of these (silent) executors back on their own queues, so their
    limits still hold; the cell's next attempt step closes the lost attempt."""
    from dbos import DBOS

    pending = DBOS.list_workflows(status="PENDING", executor_id=executors, load_input=False)
    for workflow in pending:
        DBOS.resume_workflow(workflow.workflow_id, queue_name=workflow.queue_name)
    return len(pending)


def register(sub: Any) -> None:
    """Add `tracecard worker`."""
    worker = sub.add_parser(
        "worker",
        help="run queued cells (experiment x task x trial) of the database's experiments",
        description="Take queued cells from the database (DBOS queues) and run their agents here, "
        "through this worker's own tracecard proxy; see docs/workers.md.",
    )
    worker.add_argument("--db", help="the database (postgresql://... for several machines)")
    worker.add_argument("--config", help="tracecard.toml: upstreams, [limits]")
    worker.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="runs at a time of each queue, on each worker: one value per queue in the "
        "database, set by the last worker started (default 4; docs/workers.md)",
    )
    worker.add_argument("--tags", help="comma-separated: also take cells enqueued with these tags")
    worker.add_argument("--port", type=int, default=0, help="this worker's proxy port (0: any)")
    worker.add_argument(
        "--work-dir", help="answers and output tails (default .tracecard/agent-runs)"
    )
    worker.add_argument(
        "--heartbeat", type=float, default=5.0, help="seconds between heartbeats (default 5)"
    )
    worker.add_argument(
        "--lost-after",
        type=float,
        default=30.0,
        help="a worker silent this long is lost; its cells run elsewhere (default 30 s)",
    )
    worker.set_defaults(handler=_worker)
