"""Wiring of replay: the hook on the runtime, checks at experiment creation, the finish report."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from sqlmodel import select

from tracecard.scorers.environment import fault_outcomes
from tracecard.server.faults.plan import FaultPlan, run_faults
from tracecard.server.replay.environment import TrialEnvironment
from tracecard.server.replay.plan import ReplayPlan
from tracecard.server.replay.source import build_indexes, check_plan
from tracecard.server.runs.service import RunError
from tracecard.server.runtime import Runtime
from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow
from tracecard.traces.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedReplay:
    """A checked plan and its source runs by (task, trial), ready to index new runs."""

    plan: ReplayPlan
    sources: dict[tuple[str, int], RunRow]


def install(runtime: Runtime) -> TrialEnvironment:
    """Put the environment on the runtime's hooks; report each replayed run at its finish."""
    environment = TrialEnvironment()
    runtime.hooks.environment = environment

    async def report(runtime: Runtime, run: RunRow) -> dict[str, Any] | None:
        replay, faults = environment.finished(run.id)
        found: dict[str, Any] = {}
        if replay is not None:
            found["replay"] = replay.summary()
        if faults is not None:  # each faulted call, and whether the run recovered from it
            await runtime.flush()
            spans = await anyio.to_thread.run_sync(runtime.store.spans_for_run, run.id)
            found["faults"] = fault_outcomes(spans)
        return found or None

    runtime.hooks.on_finish.append(report)
    return environment


async def check_replay(
    runtime: Runtime, plan: ReplayPlan, suite_version: str, trials: int
) -> PreparedReplay:
    """The plan checked against its source (a `RunError` naming the problem otherwise)."""
    sources = await anyio.to_thread.run_sync(
        check_plan, runtime.store, runtime.settings, plan, suite_version, trials
    )
    return PreparedReplay(plan, sources)


async def start_replay(runtime: Runtime, prepared: PreparedReplay, runs: Sequence[RunRow]) -> None:
    """Build the replay index of each new run (reads the source's spans, on a worker thread)."""
    environment = runtime.hooks.environment
    if environment is None:
        return
    built = await anyio.to_thread.run_sync(
        build_indexes, runtime.store, runtime.settings, prepared.plan, runs, prepared.sources
    )
    environment.add(built)


def start_faults(runtime: Runtime, plan: FaultPlan, runs: Sequence[RunRow]) -> None:
    """Each new run's fault state (its seed from the plan's, its task and its trial)."""
    environment = runtime.hooks.environment
    if environment is not None:
        environment.add_faults({r.id: run_faults(plan, r.task_id or "", r.trial) for r in runs})


def _unfinished(store: Store) -> list[tuple[ExperimentRow, list[RunRow]]]:
    """Experiments with an environment (replay, faults) and their runs not yet ended."""
    runs: Any = RunRow
    query = select(RunRow).where(
        runs.status.in_(("pending", "running")), runs.experiment_id.is_not(None)
    )
    with store.session() as session:
        open_runs = list(session.scalars(query))
    by_experiment: dict[str, list[RunRow]] = {}
    for run in open_runs:
        by_experiment.setdefault(str(run.experiment_id), []).append(run)
    found = []
    for experiment_id, rows in by_experiment.items():
        experiment = queries.get_experiment(store, experiment_id)
        if experiment is not None and experiment.environment:
            found.append((experiment, rows))
    return found


def _restore(runtime: Runtime, environment: TrialEnvironment) -> int:
    """Rebuild what the runs left open under an environment need (on a worker thread)."""
    restored = 0
    for experiment, runs in _unfinished(runtime.store):
        stored = experiment.environment or {}
        try:
            if stored.get("replay"):
                plan = ReplayPlan.model_validate(stored["replay"])
                sources = check_plan(
                    runtime.store,
                    runtime.settings,
                    plan,
                    experiment.suite_version,
                    experiment.trials,
                )
                environment.add(build_indexes(runtime.store, runtime.settings, plan, runs, sources))
            if stored.get("faults"):
                faults = FaultPlan.model_validate(stored["faults"])
                environment.add_faults(
                    {r.id: run_faults(faults, r.task_id or "", r.trial) for r in runs}
                )
        except (RunError, ValueError) as exc:  # e.g. its source was deleted: say so, go on
            log.warning("experiment %s: its environment cannot be restored: %s", experiment.id, exc)
            continue
        restored += len(runs)
    return restored


@asynccontextmanager
async def replay_lifespan(runtime: Runtime) -> AsyncIterator[None]:
    """At startup, before any request: the replay indexes and fault states of runs that an
    earlier process created and that have not ended (a restart never turns replay live)."""
    environment = runtime.hooks.environment
    if environment is not None:
        restored = await anyio.to_thread.run_sync(_restore, runtime, environment)
        if restored:
            log.info("replay/faults restored for %d open run(s)", restored)
    yield
