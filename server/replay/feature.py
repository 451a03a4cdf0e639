"""Wiring of replay: the hook on the runtime, checks at experiment creation, the finish report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from tracecard.scorers.environment import fault_outcomes
from tracecard.server.faults.plan import FaultPlan, run_faults
from tracecard.server.replay.environment import TrialEnvironment
from tracecard.server.replay.plan import ReplayPlan
from tracecard.server.replay.source import build_indexes, check_plan
from tracecard.server.runtime import Runtime
from tracecard.traces.models import RunRow


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
