"""The baselines' findings read back from the database (docs/audit.md): the latest `audit:null`,
`audit:oracle` and `audit:random-tool` experiments of a suite version, judged by
`scorers.audit.audit_tasks` exactly as `tracecard audit` judges them, for the suite health page
and, one task at a time, for the trace page."""

from __future__ import annotations

from dataclasses import dataclass

from tracecard.scorers.audit import (
    AUDIT_CONFIG_PREFIX,
    BASELINES,
    DEFECT_LABELS,
    BaselineRun,
    TaskAudit,
    audit_tasks,
    baseline_run,
    checks_not_run,
)
from tracecard.scorers.suite import Suite
from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow
from tracecard.traces.store import Store
from tracecard.viewer.task_view import stored_suite

__all__ = ["SuiteAudit", "audit_experiments", "suite_audit", "task_audit"]

_PROBED = ("null", "oracle")  # the baselines whose probe observations are compared


@dataclass(frozen=True)
class SuiteAudit:
    """The audit of one suite version: the baselines' experiments and each task's findings."""

    version: str
    experiments: dict[str, ExperimentRow]  # baseline -> its latest experiment on this version
    audits: list[TaskAudit]  # every task, in suite order (no findings: nothing found)
    not_checked: dict[str, str]  # defect kind -> why it was not checked
    run_labels: dict[str, str]  # run id -> "oracle, trial 1": what a trace link shows

    @property
    def flagged(self) -> list[TaskAudit]:
        """The tasks with at least one finding."""
        return [a for a in self.audits if a.findings]

    @property
    def labels(self) -> dict[str, str]:
        """Each defect kind in words."""
        return DEFECT_LABELS


def audit_experiments(store: Store, version: str) -> dict[str, ExperimentRow]:
    """The latest experiment of each baseline `tracecard audit` ran on this suite version."""
    found: dict[str, ExperimentRow] = {}
    for row in queries.list_experiments(store, limit=500, suite=version):  # newest first
        agent = row.config_name.removeprefix(AUDIT_CONFIG_PREFIX)
        if (
            row.suite_version == version
            and row.config_name.startswith(AUDIT_CONFIG_PREFIX)
            and agent in BASELINES
            and row.config.get("audit") == "baseline"
        ):
            found.setdefault(agent, row)
    return {agent: found[agent] for agent in BASELINES if agent in found}


def _runs(
    store: Store, experiments: dict[str, ExperimentRow], suite: Suite | None, task: str | None
) -> list[BaselineRun]:
    tasks = {t.id: t for t in suite.tasks} if suite is not None else {}
    found = []
    for agent, experiment in experiments.items():
        rows: list[RunRow] = queries.experiment_runs(store, experiment.id, task)
        scores = store.scores_for_runs([r.id for r in rows])
        spans = store.spans_for_runs(rows) if agent in _PROBED else {}
        for row in rows:
            task_id = str(row.task_id)
            found.append(
                baseline_run(
                    agent,
                    run_id=row.id,
                    task_id=task_id,
                    trial=row.trial,
                    status=row.status,
                    scores=[(s.component, s.passed, s.evidence) for s in scores[row.id]],
                    spans=spans.get(row.id) if agent in _PROBED else None,
                    turns=len(tasks[task_id].turns) if task_id in tasks else 0,
                    task=tasks.get(task_id),
                )
            )
    return found


def _audit(store: Store, version: str, task: str | None) -> SuiteAudit | None:
    experiments = audit_experiments(store, version)
    if not experiments:
        return None
    suite = stored_suite(store, version)
    runs = _runs(store, experiments, suite, task)
    if task is not None:
        task_ids = [task]
    elif suite is not None:
        task_ids = [t.id for t in suite.tasks]
    else:
        task_ids = sorted({r.task_id for r in runs})
    completion = {t.id: t.completion is not None for t in suite.tasks} if suite else None
    trials = experiments["oracle"].trials if "oracle" in experiments else 1
    not_checked = checks_not_run(list(experiments), trials)
    return SuiteAudit(
        version=version,
        experiments=experiments,
        audits=audit_tasks(task_ids, runs, completion),
        not_checked={kind: why for kind, why in not_checked.items() if why},
        run_labels={r.run_id: f"{r.agent}, trial {r.trial}" for r in runs},  # 0-based, as pages say
    )


def suite_audit(store: Store, version: str) -> SuiteAudit | None:
    """Every task's findings from the latest baselines on this version; None: never audited."""
    return _audit(store, version, None)


def task_audit(store: Store, run: RunRow) -> SuiteAudit | None:
    """The findings on the task `run` was a trial of (its runs only); None when the run has no
    task or its suite version was never audited."""
    if run.suite_version is None or run.task_id is None:
        return None
    return _audit(store, run.suite_version, run.task_id)
