"""Run an experiment's runs through an agent: N at a time, each with the environment contract,
a timeout, its final answer captured, and finished through the API (which probes and scores).

Interrupted (Ctrl-C, or the task cancelled), it stops every agent it started, keeps the runs
that finished, and finishes every other run as `aborted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracecard.client import ExperimentHandle, RunHandle, TracecardClient, TracecardError
from tracecard.server.orchestration.agents import AgentOutcome, AgentRunner, agent_environment

__all__ = ["Orchestrator", "RunOutcome", "write_logs"]


@dataclass
class RunOutcome:
    """One run as it ended: status, answer, why it failed, and its scores."""

    run: RunHandle
    status: str
    final_answer: str | None = None
    error: str | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)  # component -> score
    flags: list[str] = field(default_factory=list)
    finish_error: str | None = None  # the server could not finish it
    # why it ended when that is the infrastructure's failure (`INFRA_REASONS`), else None
    end_reason: str | None = None

    def passed(self, component: str) -> bool | None:
        """Whether a component passed (None: not scored)."""
        score = self.scores.get(component)
        return None if score is None else score.get("passed")


Listener = Callable[[str, RunHandle, RunOutcome | None], None]  # ("started"|"ended", run, ...)


class Orchestrator:
    """Runs the runs of one experiment with one agent."""

    def __init__(
        self,
        client: TracecardClient,
        agent: AgentRunner,
        *,
        concurrency: int = 4,
        timeout_s: float = 300.0,
        work_dir: Path,
        token: str | None = None,
        listener: Listener | None = None,
        keep_answers: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if timeout_s <= 0:
            raise ValueError("the timeout must be positive")
        self.client = client
        self.agent = agent
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.work_dir = work_dir
        self.token = token
        self.listener = listener
        self.keep_answers = keep_answers
        self.outcomes: dict[str, RunOutcome] = {}  # run id -> outcome, as runs end
        self._ended: dict[str, AgentOutcome] = {}  # run id -> how its agent ended

    def _notify(self, event: str, run: RunHandle, outcome: RunOutcome | None = None) -> None:
        if self.listener is not None:
            self.listener(event, run, outcome)

    async def run(
        self, experiment: ExperimentHandle, runs: Sequence[RunHandle] | None = None
    ) -> list[RunOutcome]:
        """Run every run (or the given ones) of the experiment; returns their outcomes in order."""
        todo = list(experiment.runs if runs is None else runs)
        gate = asyncio.Semaphore(self.concurrency)
        config_name = str(experiment.config.get("name", "default"))
        tasks = [
            asyncio.create_task(self._run_one(experiment.id, config_name, run, gate), name=run.id)
            for run in todo
        ]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                if not task.done() and not task.cancelling():  # cancelling twice cuts clean-up
                    task.cancel()
            # each cancelled run stops its agent's process group before it returns
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._abort_unfinished(todo)
            raise
        return [self.outcomes[run.id] for run in todo]

    async def _run_one(
        self, experiment_id: str, config_name: str, run: RunHandle, gate: asyncio.Semaphore
    ) -> None:
        async with gate:
            self._notify("started", run)
            run_dir = self.work_dir / run.id
            run_dir.mkdir(parents=True, exist_ok=True)
            answer_file = run_dir / "answer.txt"
            answer_file.unlink(missing_ok=True)
            env = agent_environment(
                run,
                server_url=self.client.base_url,
                experiment_id=experiment_id,
                config_name=config_name,
                answer_file=answer_file,
                token=self.token,
            )
            agent_outcome = await self.agent(env, answer_file, self.timeout_s)
            self._ended[run.id] = agent_outcome  # kept if we are interrupted while finishing
            write_logs(run_dir, agent_outcome)
            if not self.keep_answers:
                shutil.rmtree(run_dir, ignore_errors=True)
            outcome = await self._finish(run, agent_outcome)
            self.outcomes[run.id] = outcome
            self._notify("ended", run, outcome)

    async def _finish(self, run: RunHandle, agent_outcome: AgentOutcome) -> RunOutcome:
        outcome = RunOutcome(
            run=run,
            status=agent_outcome.status,
            final_answer=agent_outcome.final_answer,
            error=agent_outcome.error,
            exit_code=agent_outcome.exit_code,
            duration_s=agent_outcome.duration_s,
        )
        try:
            finished = await asyncio.to_thread(
                self.client.finish_run,
                run.id,
                final_answer=agent_outcome.final_answer,
                status=agent_outcome.status,  # type: ignore[arg-type]
                error=agent_outcome.error,
            )
        except TracecardError as exc:
            outcome.finish_error = str(exc)
            return outcome
        outcome.scores = {s["component"]: s for s in finished.get("scores") or []}
        outcome.flags = list(finished.get("flags") or [])
        return outcome

    async def _abort_unfinished(self, runs: Sequence[RunHandle]) -> None:
        """Finish every run without an outcome as `aborted` (the server may have finished one
        whose request was under way: that one is kept)."""
        reason = "aborted: the orchestrator was interrupted before this run ended"

        def abort(run: RunHandle) -> None:
            started = time.monotonic()
            outcome = RunOutcome(run=run, status="aborted", error=reason)
            finished: dict[str, Any] = {}
            try:
                finished = self.client.finish_run(run.id, status="aborted", error=reason)
            except TracecardError as exc:
                if exc.status_code != 409:
                    outcome.finish_error = str(exc)
                else:  # it ended while we were interrupted: keep what the server has
                    with contextlib.suppress(TracecardError):
                        finished = self.client.get_run(run.id)
                        outcome.status = finished["status"]
                        outcome.final_answer = finished.get("final_answer")
                        outcome.error = finished.get("error")
                    if run.id in self._ended:
                        outcome.error = self._ended[run.id].error or outcome.error
                        outcome.exit_code = self._ended[run.id].exit_code
            outcome.scores = {s["component"]: s for s in finished.get("scores") or []}
            outcome.flags = list(finished.get("flags") or [])
            outcome.duration_s = time.monotonic() - started
            self.outcomes[run.id] = outcome

        pending = [run for run in runs if run.id not in self.outcomes]
        await asyncio.gather(*(asyncio.to_thread(abort, run) for run in pending))


def write_logs(run_dir: Path, outcome: AgentOutcome) -> None:
    """Keep the output tails beside the answer file, for a person to read."""
    if outcome.stdout_tail:
        (run_dir / "stdout.txt").write_text(outcome.stdout_tail, encoding="utf-8")
    if outcome.stderr_tail:
        (run_dir / "stderr.txt").write_text(outcome.stderr_tail, encoding="utf-8")
