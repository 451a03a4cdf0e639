"""Run the baseline agents on a suite (one experiment each, per-run sandboxes as configured) and
read their scored runs back as the audit's input."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tracecard._requests import _Requests
from tracecard.client import ExperimentHandle, TracecardClient
from tracecard.scorers.audit import BASELINES, BaselineRun, baseline_run
from tracecard.scorers.suite import Suite
from tracecard.server.audit.agents import play
from tracecard.server.orchestration.agents import AgentRunner, PythonAgent

__all__ = [
    "BASELINES",
    "BaselineExperiment",
    "baseline_agent",
    "collect_runs",
    "run_baselines",
]

# (client, experiment, agent, label) -> outcomes
Orchestrate = Callable[[TracecardClient, ExperimentHandle, AgentRunner, str], object]


@dataclass(frozen=True)
class BaselineExperiment:
    """One baseline's experiment on the suite."""

    agent: str
    experiment_id: str


def baseline_agent(kind: str, suite: Suite, seed: int = 0) -> PythonAgent:
    """A built-in baseline awaited in this process, under the same environment contract as
    `python -m tracecard.server.audit.agents KIND` (one Python start-up less per run)."""

    async def agent(env: Mapping[str, str]) -> str | None:
        return await play(kind, suite.task(env["TRACECARD_TASK_ID"]), env, seed)

    return PythonAgent(agent)


def run_baselines(
    client: TracecardClient,
    suite: Suite,
    suite_version: str,
    agents: Sequence[str],
    trials: int,
    orchestrate: Orchestrate,
    seed: int = 0,
) -> list[BaselineExperiment]:
    """One experiment per baseline (config `audit:AGENT`), each run through the proxy like any
    agent's; returns the experiments in `agents` order."""
    done = []
    for agent in agents:
        spec = f"builtin:{agent}" + (f":{seed}" if agent == "random-tool" and seed else "")
        config = {"name": f"audit:{agent}", "agent": spec, "audit": "baseline"}
        experiment = client.create_experiment(suite_version, config, trials)
        orchestrate(client, experiment, baseline_agent(agent, suite, seed), f"audit:{agent}")
        done.append(BaselineExperiment(agent, experiment.id))
    return done


def collect_runs(
    client: TracecardClient, suite: Suite, experiments: Sequence[BaselineExperiment]
) -> list[BaselineRun]:
    """Every baseline run with its component verdicts, the first failure of each, and (for the
    null and oracle runs) what each probe observed, read from the run's stored spans."""
    turns = {task.id: len(task.turns) for task in suite.tasks}
    tasks = {task.id: task for task in suite.tasks}
    runs = []
    for baseline in experiments:
        card = client.scorecard(baseline.experiment_id)
        for run in card["runs"]:
            spans = None
            if baseline.agent in ("null", "oracle"):
                spans = client._do(_Requests.get(f"/api/runs/{run['run_id']}/spans"))["spans"]
            runs.append(
                baseline_run(
                    baseline.agent,
                    run_id=run["run_id"],
                    task_id=run["task_id"],
                    trial=int(run.get("trial", 0)),
                    status=run["status"],
                    scores=[
                        (c["component"], c.get("passed"), c.get("evidence"))
                        for c in run["components"]
                    ],
                    spans=spans,
                    turns=turns.get(run["task_id"], 0),
                    task=tasks.get(run["task_id"]),
                )
            )
    return runs
