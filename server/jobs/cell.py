"""One (experiment, task, trial) cell as a DBOS workflow: the same code for `tracecard run` (an
in-process worker) and `tracecard worker` (cells taken from the queue).

Its steps are checkpointed in DBOS's system database:
1. `prepare`: the cell's run (attempt 1's run is made with the experiment);
2. `attempt`: begin the attempt on the server that serves its agent (which loads the
   experiment's replay/fault environment for the run), start the agent, wait for it. A started
   agent's progress lives in its process, so this step is the unit a crash repeats: when it runs
   again, the server finds the attempt already begun, closes it as `worker_lost` (no scores) and
   hands out a new run, the cell's next attempt;
3. `finish`: finish the run through the API, which runs the probes and the scorers (a finish
   that got through before a crash is read back, never repeated).

A cell's workflow id comes from the cell (`cell_workflow_id`), so one cell never runs twice at
once; a rerun is a new workflow id with the attempt in it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypedDict, TypeVar

from dbos import DBOS

from tracecard.client import (
    RunHandle,
    TracecardClient,
    TracecardConnectionError,
    TracecardError,
)
from tracecard.server.orchestration.agents import AgentOutcome, AgentRunner, CommandAgent

__all__ = [
    "Cell",
    "CellContext",
    "cell_workflow_id",
    "contexts",
    "run_cell",
]


class Cell(TypedDict):
    """A cell's job arguments: everything a worker on another machine needs (JSON-like)."""

    experiment_id: str
    config_name: str
    task_id: str
    trial: int
    run_id: str  # the run of its first attempt (or of the rerun's attempt)
    agent: list[str] | None  # argv; None: an in-process agent of the process that enqueued it
    timeout_s: float
    grace_s: float
    context: str  # the key of the process-local CellContext (see `contexts`)


P = ParamSpec("P")
R = TypeVar("R")
Listener = Callable[[str, RunHandle, dict[str, Any] | None], None]


@dataclass
class CellContext:
    """What a cell's steps need that cannot travel with the job: the client of the server that
    serves the agent, an in-process agent, where output goes, who to tell."""

    client: TracecardClient
    executor: str
    work_dir: Path
    agent: AgentRunner | None = None
    token: str | None = None
    keep_answers: bool = True
    on_started: Callable[[RunHandle], None] | None = None
    on_agent_ended: Callable[[RunHandle, AgentOutcome], None] | None = None
    host: str = field(default_factory=socket.gethostname)


# Process-local: context key -> context. A worker registers "worker"; `tracecard run` its own.
contexts: dict[str, CellContext] = {}


def cell_workflow_id(experiment_id: str, task_id: str, trial: int, attempt: int = 1) -> str:
    """The cell's job id: one cell, one workflow (a rerun's attempt has its own)."""
    suffix = "" if attempt <= 1 else f":r{attempt}"
    return f"cell:{experiment_id}:{task_id}:{trial}{suffix}"


def _context(cell: Cell) -> CellContext:
    context = contexts.get(cell["context"]) or contexts.get("worker")
    if context is None:
        raise RuntimeError(f"no job context {cell['context']!r} in this process")
    return context


def handle_of(view: dict[str, Any]) -> RunHandle:
    """A run as the agent contract needs it, from the API's run view."""
    return RunHandle(
        id=view["id"],
        task_id=view["task_id"],
        trial=int(view["trial"]),
        instruction=view.get("instruction") or "",
        urls=dict(view.get("urls") or {}),
        models=dict(view.get("models") or {}),
        traceparent=f"00-{view['trace_id']}-{view['root_span_id']}-01",
    )


def _unreachable(exc: BaseException) -> bool:
    return isinstance(exc, TracecardConnectionError)


# prepare and finish talk to the server that serves the agent: a connection that broke (a
# reset under load, the server restarting) is tried again, 5 times over about 15 s, instead of
# ending the cell's job in an error that leaves its run pending or running for ever (2 of 600
# cells of a 3-worker bench at load 30). A finish that got through before its answer was lost
# is read back (409), never redone.
def _server_step(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    return DBOS.step(
        name=name,
        retries_allowed=True,
        max_attempts=5,
        interval_seconds=1.0,
        backoff_rate=2.0,
        should_retry=_unreachable,
    )


@_server_step("tracecard.cell.prepare")
async def prepare(cell: Cell) -> str:
    """The run of this cell's attempt (made with the experiment, or by a rerun)."""
    client = _context(cell).client
    run = await asyncio.to_thread(client.get_run, cell["run_id"])
    return str(run["id"])


def _agent_for(cell: Cell, context: CellContext) -> AgentRunner:
    if cell["agent"] is None:
        if context.agent is None or cell["context"] not in contexts:
            raise RuntimeError(
                "this cell's agent runs inside the process that started the experiment "
                "(an in-process agent): it cannot run in another process"
            )
        return context.agent
    if cell["context"] in contexts and context.agent is not None:
        return context.agent
    # a worker killed with -9 takes its agents with it: a half-run agent never goes on alone
    return CommandAgent(cell["agent"], grace_s=cell["grace_s"], die_with_parent=True)


# preemptible: DBOS cancels the step (and so stops the agent) when the cell's job is cancelled
@DBOS.step(name="tracecard.cell.attempt", preemptible=True)
async def attempt(cell: Cell, run_id: str) -> dict[str, Any]:
    """Begin the attempt, start the agent, wait for it; returns the run and how it ended."""
    from tracecard.server.jobs.http import post_json
    from tracecard.server.orchestration.agents import agent_environment
    from tracecard.server.orchestration.orchestrator import write_logs

    context = _context(cell)
    body = {"run_id": run_id, "executor": context.executor, "host": context.host}
    view = await asyncio.to_thread(post_json, context.client, "/api/jobs/attempts", body)
    run = handle_of(view)
    if context.on_started is not None:
        context.on_started(run)
    run_dir = context.work_dir / run.id
    run_dir.mkdir(parents=True, exist_ok=True)
    answer_file = run_dir / "answer.txt"
    answer_file.unlink(missing_ok=True)
    env = agent_environment(
        run,
        server_url=context.client.base_url,
        experiment_id=cell["experiment_id"],
        config_name=cell["config_name"],
        answer_file=answer_file,
        token=context.token,
    )
    try:
        outcome = await _agent_for(cell, context)(env, answer_file, cell["timeout_s"])
    except asyncio.CancelledError:  # the agent's process group is stopped by now
        workflow_id = DBOS.workflow_id
        if workflow_id is not None and await _job_cancelled(workflow_id):
            # `experiment cancel` (DBOS preempts this step): the run ends unscored, its
            # per-run processes go
            path = f"/api/jobs/attempts/{run.id}/cancelled"
            await asyncio.to_thread(post_json, context.client, path, {})
            if context.on_agent_ended is not None:
                why = "cancelled: tracecard experiment cancel"
                context.on_agent_ended(run, AgentOutcome("aborted", None, why, None, 0.0))
        raise
    if context.on_agent_ended is not None:
        context.on_agent_ended(run, outcome)
    write_logs(run_dir, outcome)
    if not context.keep_answers:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)
    return {"run": view, "attempt": view.get("attempt", 1), "agent": asdict(outcome)}


async def _job_cancelled(workflow_id: str) -> bool:
    """Whether the cell's job was cancelled (not the process stopping: Ctrl-C, shutdown)."""
    # off the step's context (run_in_executor copies none): a plain read, not a recorded step
    loop = asyncio.get_running_loop()
    status = await loop.run_in_executor(None, DBOS.get_workflow_status, workflow_id)
    return status is not None and status.status == "CANCELLED"


@_server_step("tracecard.cell.finish")
async def finish(cell: Cell, ran: dict[str, Any]) -> dict[str, Any]:
    """Finish the run (probes, scorers); a run already finished is read back, not redone."""
    client = _context(cell).client
    agent = ran["agent"]
    run_id = ran["run"]["id"]
    try:
        finished = await asyncio.to_thread(
            client.finish_run,
            run_id,
            final_answer=agent["final_answer"],
            status=agent["status"],
            error=agent["error"],
        )
    except TracecardConnectionError:
        raise  # tried again (see _unreachable)
    except TracecardError as exc:
        if exc.status_code != 409:
            return {"finish_error": str(exc)}
        finished = await asyncio.to_thread(client.get_run, run_id)
    return {
        "status": finished.get("status"),
        "end_reason": finished.get("end_reason"),
        "error": finished.get("error"),
        "scores": finished.get("scores") or [],
        "flags": finished.get("flags") or [],
    }


@DBOS.workflow(name="tracecard.cell")
async def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell to its end: prepare, attempt (agent), finish (probes, scores)."""
    run_id = await prepare(cell)
    ran = await attempt(cell, run_id)
    finished = await finish(cell, ran)
    return {**ran, **finished}
