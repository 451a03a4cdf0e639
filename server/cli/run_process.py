"""Running an experiment's cells in this process, shared by `tracecard run`, `demo` and
`audit`: the connection to a tracecard server (given or embedded), the job orchestrator behind
a progress bar, and SIGTERM handled the way Ctrl-C is."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from tracecard.client import ExperimentHandle, TracecardClient, TracecardError
from tracecard.server.cli.common import describe_db, settings_from_args
from tracecard.server.orchestration.agents import AgentRunner
from tracecard.server.orchestration.embedded import embedded_server
from tracecard.server.orchestration.orchestrator import RunOutcome
from tracecard.server.orchestration.summary import RunProgress
from tracecard.server.runs.service import RunError

T = TypeVar("T")


@contextlib.contextmanager
def connect(args: argparse.Namespace) -> Iterator[TracecardClient]:
    """A client of `--server`, or of an embedded server built from the tracecard settings."""
    if args.server:
        with TracecardClient(args.server, token=args.token) as client:
            try:
                client.health()
            except TracecardError as exc:
                raise RunError(f"--server {args.server}: {exc}") from exc
            yield client
        return
    settings = settings_from_args(args, db=args.db, port=args.port)
    args.database = describe_db(settings.db)  # what later commands need as --db
    args.jobs_db = _jobs_db(settings.db)
    with embedded_server(settings) as served:
        with TracecardClient(served.base_url, token=served.api_token) as client:
            yield client


def _jobs_db(db: str) -> str | None:
    """DBOS's system database beside tracecard's (None: in-memory, jobs go beside the work)."""
    from tracecard.server.jobs.engine import system_database_url
    from tracecard.traces.engine import normalise_url

    try:
        return system_database_url(normalise_url(db))
    except ValueError:
        return None


def orchestrate(
    client: TracecardClient,
    experiment: ExperimentHandle,
    agent: AgentRunner,
    *,
    console: Console,
    concurrency: int,
    timeout_s: float,
    work_dir: Path,
    progress: bool = True,
    label: str | None = None,
    jobs_db: str | None = None,
) -> tuple[list[RunOutcome], bool]:
    """Run the experiment with a progress bar; returns the outcomes and whether it was
    interrupted (Ctrl-C: unfinished runs are then aborted). Each run is a cell job (DBOS,
    `tracecard.server.jobs`) checkpointed in `jobs_db` (default: beside the work folder)."""
    from tracecard.server.jobs.local import JobOrchestrator

    bar = RunProgress(console, len(experiment.runs), label or experiment.config["name"], progress)
    orchestrator = JobOrchestrator(
        client,
        agent,
        concurrency=concurrency,
        timeout_s=timeout_s,
        work_dir=work_dir,
        token=client.token,
        listener=bar,
        system_url=jobs_db or f"sqlite:///{work_dir.parent.resolve() / 'jobs.sqlite'}",
    )
    interrupted = False
    with bar:
        try:
            asyncio.run(_cancel_on_sigterm(orchestrator.run(experiment)))
        except (KeyboardInterrupt, asyncio.CancelledError):
            interrupted = True
        finally:
            interrupt_on_sigterm()  # asyncio reset it when the loop closed
    outcomes = [
        orchestrator.outcomes[r.id] for r in experiment.runs if r.id in orchestrator.outcomes
    ]
    return outcomes, interrupted


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def interrupt_on_sigterm() -> None:
    """Make SIGTERM stop `tracecard run` and `tracecard demo` the way Ctrl-C does: agents
    stopped, unfinished runs aborted, the embedded server shut down cleanly."""
    with contextlib.suppress(ValueError):  # only the main thread may set handlers
        signal.signal(signal.SIGTERM, _raise_interrupt)


async def _cancel_on_sigterm(work: Coroutine[Any, Any, T]) -> T:
    """Await `work`; SIGTERM cancels it (inside the loop, like asyncio.run does for SIGINT)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await work
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)


def serve_forever() -> None:
    """Block until Ctrl-C (the embedded server keeps serving in its thread)."""
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)
