"""Resume, rerun and cancel an experiment's cells (`tracecard experiment ...`), on the database:
tracecard's tables say what each cell's state is, DBOS's say where its job is."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from tracecard.server.errors import RunError
from tracecard.server.jobs.attempts import end_cancelled, new_cell_run
from tracecard.server.jobs.cell import Cell
from tracecard.server.jobs.cells import experiment_cells
from tracecard.server.settings import Settings
from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, JobWorkerRow, RunRow
from tracecard.traces.store import Store

__all__ = ["Plan", "cancel", "parse_workflow_id", "resume", "rerun"]

UNFINISHED = ("queued", "running", "infra", "cancelled")


@dataclass
class Plan:
    """What a command did to the cells, for the person who asked."""

    enqueued: list[str] = field(default_factory=list)  # new jobs
    resumed: list[str] = field(default_factory=list)  # jobs put back on their queue
    waiting: list[str] = field(default_factory=list)  # already queued, or run by a live worker
    cancelled: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The plan as JSON."""
        return {k: list(v) for k, v in self.__dict__.items()}


def parse_workflow_id(workflow_id: str) -> tuple[str, str, int, int] | None:
    """`cell:EXP:TASK:TRIAL[:rN]` -> (experiment, task, trial, attempt); None for another job."""
    parts = workflow_id.split(":")
    if len(parts) < 4 or parts[0] != "cell":
        return None
    attempt = 1
    if parts[-1].startswith("r") and parts[-1][1:].isdigit():
        attempt, parts = int(parts[-1][1:]), parts[:-1]
    if not parts[-1].isdigit():
        return None
    return parts[1], ":".join(parts[2:-1]), int(parts[-1]), attempt


def _jobs(client: Any, experiment_id: str) -> dict[tuple[str, int], list[Any]]:
    """The experiment's cell jobs by cell, oldest attempt first."""
    found: dict[tuple[str, int], list[Any]] = {}
    for status in client.list_workflows(
        workflow_id_prefix=f"cell:{experiment_id}:", load_input=False, load_output=False
    ):
        parsed = parse_workflow_id(status.workflow_id)
        if parsed is not None and parsed[0] == experiment_id:
            found.setdefault((parsed[1], parsed[2]), []).append((parsed[3], status))
    return {k: [s for _, s in sorted(v, key=lambda p: p[0])] for k, v in found.items()}


def _claim_silent(store: Store, lost_after_s: float, me: str) -> tuple[set[str], set[str]]:
    """Workers: (those known, those whose cells this command may resume). A silent worker is
    claimed as a live worker's heartbeat would claim it (`recovered_by`), so its cells are
    resumed once, by whoever claimed it first."""
    from sqlalchemy import update

    from tracecard.server.jobs.heartbeat import silent_workers

    rows = JobWorkerRow
    with store.writing() as session:
        session.execute(
            update(rows).where(silent_workers(session, lost_after_s)).values(recovered_by=me)
        )
    with store.session() as session:
        known = set(session.scalars(select(rows.id)))
        mine = set(session.scalars(select(rows.id).where(col(rows.recovered_by) == me)))
    return known, mine


def _agent(experiment: ExperimentRow, agent: str | None) -> list[str]:
    command = agent or experiment.config.get("agent")
    if not command:
        raise RunError(
            f"experiment {experiment.id} has no agent command in its config: pass --agent CMD", 422
        )
    return shlex.split(str(command))


def _queue_of(settings: Settings, store: Store, experiment: ExperimentRow, task_id: str) -> str:
    from tracecard.server.evaluation.service import find_suite
    from tracecard.server.jobs.limits import cell_queue

    suite, _ = find_suite(store, experiment.suite_version)
    return cell_queue(settings, list(suite.task(task_id).upstreams))


def _cell(experiment: ExperimentRow, run: RunRow, argv: list[str], timeout_s: float) -> Cell:
    return Cell(
        experiment_id=experiment.id,
        config_name=experiment.config_name,
        task_id=run.task_id or "",
        trial=run.trial,
        run_id=run.id,
        agent=argv,
        timeout_s=timeout_s,
        grace_s=5.0,
        context="worker",
    )


def resume(
    store: Store,
    settings: Settings,
    system_url: str,
    experiment_id: str,
    *,
    agent: str | None = None,
    timeout_s: float = 300.0,
    lost_after_s: float = 30.0,
) -> Plan:
    """Every unfinished cell back on its queue: a job left pending by a worker that is gone (or
    cancelled) resumes from its last step; a cell with no job, or whose job ended in an error,
    gets a new job (on its latest run, or a new attempt's run)."""
    from tracecard.server.jobs.enqueue import dbos_client, enqueue_cells

    experiment = _experiment(store, experiment_id)
    cells = experiment_cells(store, experiment_id)["cells"]
    with dbos_client(system_url) as client:
        plan, new = _resume(
            store, settings, client, experiment, cells, agent, timeout_s, lost_after_s
        )
    plan.enqueued = enqueue_cells(system_url, new) if new else []
    return plan


def _resume(
    store: Store,
    settings: Settings,
    client: Any,
    experiment: ExperimentRow,
    cells: list[dict[str, Any]],
    agent: str | None,
    timeout_s: float,
    lost_after_s: float,
) -> tuple[Plan, list[tuple[Cell, str, int]]]:
    from tracecard.server.jobs.engine import executor_id

    jobs = _jobs(client, experiment.id)
    known, mine = _claim_silent(store, lost_after_s, executor_id("resume"))
    plan = Plan()
    new: list[tuple[Cell, str, int]] = []
    argv: list[str] | None = None
    for cell in cells:
        if cell["state"] not in UNFINISHED:
            continue
        key = (cell["task_id"], cell["trial"])
        tried = jobs.get(key, [])
        job = tried[-1] if tried else None
        queue = _queue_of(settings, store, experiment, cell["task_id"])
        # pending on a live worker, or on a dead one another worker recovers: left to them
        # (an executor with no worker row is a `tracecard run` process, gone if resumed)
        others = job is not None and job.executor_id in known and job.executor_id not in mine
        if job is not None and (job.status == "ENQUEUED" or job.status == "PENDING" and others):
            plan.waiting.append(job.workflow_id)
            continue
        if job is not None and job.status in ("PENDING", "CANCELLED"):
            client.resume_workflow(job.workflow_id, queue_name=job.queue_name or queue)
            plan.resumed.append(job.workflow_id)
            continue
        argv = argv or _agent(experiment, agent)
        run = store.get_run(cell["run_id"])
        assert run is not None
        if job is not None or run.status != "pending":  # the job ended: a new attempt
            run = new_cell_run(store, settings, run.id)
        attempt = len(tried) + 1
        new.append((_cell(experiment, run, argv, timeout_s), queue, attempt))
    return plan, new


def rerun(
    store: Store,
    settings: Settings,
    system_url: str,
    experiment_id: str,
    selection: str,
    *,
    agent: str | None = None,
    timeout_s: float = 300.0,
) -> Plan:
    """Chosen cells again, each as a new attempt (a new run; the earlier ones are kept and
    shown, the scorecard reads the latest completed). `selection`: `errored` (the agent failed:
    errored or timed out), `infra`, `all`, or `task=ID[,ID...]`."""
    from tracecard.server.jobs.enqueue import enqueue_cells

    experiment = _experiment(store, experiment_id)
    argv = _agent(experiment, agent)
    cells = experiment_cells(store, experiment_id)["cells"]
    chosen = _select(cells, selection)
    new = []
    for cell in chosen:
        run = new_cell_run(store, settings, cell["run_id"])
        attempts = len(
            [
                r
                for r in queries.experiment_runs(store, experiment_id, run.task_id)
                if r.trial == run.trial
            ]
        )
        queue = _queue_of(settings, store, experiment, cell["task_id"])
        new.append((_cell(experiment, run, argv, timeout_s), queue, attempts))
    return Plan(enqueued=enqueue_cells(system_url, new) if new else [])


def _select(cells: list[dict[str, Any]], selection: str) -> list[dict[str, Any]]:
    if selection == "all":
        return cells
    if selection in ("errored", "failed"):
        return [c for c in cells if c["state"] == "failed"]
    if selection == "infra":
        return [c for c in cells if c["state"] == "infra"]
    if selection.startswith("task="):
        wanted = {t for t in selection[5:].split(",") if t}
        known = {c["task_id"] for c in cells}
        unknown = sorted(wanted - known)
        if unknown:
            raise RunError(f"--cells: no task {', '.join(unknown)} in this experiment", 422)
        return [c for c in cells if c["task_id"] in wanted]
    raise RunError(f"--cells {selection!r}: say errored, infra, all, or task=ID[,ID...]", 422)


def cancel(store: Store, system_url: str, experiment_id: str) -> Plan:
    """Cancel every queued or running cell job; every run not ended yet ends `aborted`, end
    reason `cancelled` (not scored). A running agent is stopped by its worker, which watches
    its cell's job for the cancellation (`tracecard.server.jobs.cell.attempt`)."""
    from tracecard.server.jobs.enqueue import dbos_client

    _experiment(store, experiment_id)
    plan = Plan()
    with dbos_client(system_url) as client:
        ids = [
            job.workflow_id
            for tried in _jobs(client, experiment_id).values()
            for job in tried
            if job.status in ("ENQUEUED", "PENDING")
        ]
        if ids:
            client.cancel_workflows(ids)
    plan.cancelled = ids
    for run in queries.experiment_runs(store, experiment_id):  # begun or not: none is scored
        end_cancelled(store, run.id)
    return plan


def _experiment(store: Store, experiment_id: str) -> ExperimentRow:
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise RunError(f"no experiment with id {experiment_id!r}", 404)
    return experiment
