"""The in-process worker of `tracecard run` (and `demo`, `audit`): the experiment's cells run as
the same DBOS workflow a `tracecard worker` runs, started here N at a time instead of taken from
a queue. Ctrl-C still stops every agent and aborts the unfinished runs (the orchestrator's
behaviour); their workflows stay pending, for `tracecard experiment resume`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from tracecard.client import ExperimentHandle, RunHandle
from tracecard.server.jobs.cell import Cell, CellContext, cell_workflow_id, contexts, run_cell
from tracecard.server.jobs.engine import executor_id, launch
from tracecard.server.orchestration.agents import AgentOutcome, CommandAgent
from tracecard.server.orchestration.orchestrator import Orchestrator, RunOutcome
from tracecard.traces.experiments import INFRA_REASONS

__all__ = ["JobOrchestrator", "outcome_of"]


def outcome_of(run: RunHandle, result: dict[str, Any]) -> RunOutcome:
    """A cell workflow's result as the orchestrator's outcome of the run."""
    agent = result["agent"]
    outcome = RunOutcome(
        run=run,
        status=agent["status"],
        final_answer=agent["final_answer"],
        error=agent["error"],
        exit_code=agent["exit_code"],
        duration_s=agent["duration_s"],
        finish_error=result.get("finish_error"),
    )
    if result.get("end_reason") in INFRA_REASONS:  # the server ended it: not the agent's
        outcome.status, outcome.end_reason = "errored", result["end_reason"]
        outcome.error = result.get("error") or result["end_reason"]
    outcome.scores = {s["component"]: s for s in result.get("scores") or []}
    outcome.flags = list(result.get("flags") or [])
    return outcome


class JobOrchestrator(Orchestrator):
    """An orchestrator whose runs are cell jobs (DBOS workflows, checkpointed in `system_url`)."""

    def __init__(self, *args: Any, system_url: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.system_url = system_url
        self.executor = executor_id("run")
        self._context = f"run-{uuid.uuid4().hex}"

    async def run(
        self, experiment: ExperimentHandle, runs: Sequence[RunHandle] | None = None
    ) -> list[RunOutcome]:
        """Run every run (or the given ones) as a cell job; returns their outcomes in order."""
        await asyncio.to_thread(launch, self.system_url, self.executor)
        contexts[self._context] = CellContext(
            client=self.client,
            executor=self.executor,
            work_dir=self.work_dir,
            agent=self.agent,
            token=self.token,
            keep_answers=self.keep_answers,
            on_agent_ended=self._agent_ended,
        )
        try:
            return await super().run(experiment, runs)
        finally:
            contexts.pop(self._context, None)

    def _agent_ended(self, run: RunHandle, outcome: AgentOutcome) -> None:
        self._ended[run.id] = outcome  # kept if we are interrupted while finishing

    def _cell(self, experiment_id: str, config_name: str, run: RunHandle) -> Cell:
        command = self.agent if isinstance(self.agent, CommandAgent) else None
        return Cell(
            experiment_id=experiment_id,
            config_name=config_name,
            task_id=run.task_id,
            trial=run.trial,
            run_id=run.id,
            agent=list(command.argv) if command else None,
            timeout_s=self.timeout_s,
            grace_s=command.grace_s if command else 5.0,
            context=self._context,
        )

    async def _run_one(
        self, experiment_id: str, config_name: str, run: RunHandle, gate: asyncio.Semaphore
    ) -> None:
        from dbos import SetWorkflowID

        async with gate:
            self._notify("started", run)
            cell = self._cell(experiment_id, config_name, run)
            try:
                with SetWorkflowID(cell_workflow_id(experiment_id, run.task_id, run.trial)):
                    result = await run_cell(cell)
                outcome = outcome_of(run, result)
            except Exception as exc:  # noqa: BLE001 - the job's failure is this run's, not all
                why = f"the run's job failed: {type(exc).__name__}: {exc}"
                outcome = RunOutcome(run=run, status="errored", error=why, finish_error=why)
            self.outcomes[run.id] = outcome
            self._notify("ended", run, outcome)
