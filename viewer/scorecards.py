"""Scorecards from the store, computed by `scorers` exactly as the exports compute them, and the
paired comparison of two experiments."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from tracecard.scorers.compare import CLASS_ORDER, Comparison, compare_experiments
from tracecard.scorers.scorecard import RunRecord, Scorecard, Verdict, build_scorecard
from tracecard.scorers.suite import Suite, Task
from tracecard.scorers.types import ComponentScore
from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow
from tracecard.traces.store import Store
from tracecard.traces.verdicts import verdicts_for_runs


@dataclass(frozen=True)
class ExperimentCard:
    """An experiment with its scorecard and the largest k its cells report."""

    experiment: ExperimentRow
    scorecard: Scorecard
    k: int


def _suite(store: Store, experiment: ExperimentRow, runs: Sequence[RunRow]) -> Suite:
    """The stored suite document; rebuilt from the runs' task ids if it is missing or invalid."""
    stored = queries.get_suite(store, experiment.suite_version)
    task_ids = sorted({r.task_id for r in runs if r.task_id})
    if stored is not None:
        try:
            suite = Suite.model_validate(stored.document)
        except ValidationError:
            suite = None
        if suite is not None and task_ids and set(task_ids) <= {t.id for t in suite.tasks}:
            return suite
    tasks = [Task(id=t, instruction="") for t in task_ids] or [Task(id="-", instruction="")]
    return Suite(schema_version=1, name=experiment.suite_name, tasks=tasks)


def experiment_card(
    store: Store, experiment: ExperimentRow, resamples: int = 2000
) -> ExperimentCard:
    """Build the experiment's scorecard from its stored runs, scores and verdicts."""
    runs = [r for r in queries.experiment_runs(store, experiment.id) if r.task_id]
    ids = [r.id for r in runs]
    scores = store.scores_for_runs(ids)
    verdicts = verdicts_for_runs(store, ids)
    records = [
        RunRecord(
            run_id=run.id,
            task_id=str(run.task_id),
            trial=run.trial,
            status=run.status,
            final_answer=run.final_answer,
            components=[
                ComponentScore(
                    component=s.component,
                    value=s.value,
                    passed=s.passed,
                    evidence=s.evidence,
                    scorer=s.scorer,
                    version=s.scorer_version,
                )
                for s in scores.get(run.id, [])
            ],
            flags=list(run.flags or []),
        )
        for run in runs
    ]
    judged = [
        Verdict(
            run_id=v.run_id,
            component=v.component,
            agree=v.agree,
            note=v.note or "",
            author=v.author or "",
        )
        for run_verdicts in verdicts.values()
        for v in run_verdicts
    ]
    card = build_scorecard(
        _suite(store, experiment, runs),
        {"id": experiment.id, "config": {"name": experiment.config_name, **experiment.config}},
        records,
        judged,
        resamples=resamples,
    )
    k = max((s.evaluated for t in card.tasks for s in t.components), default=0)
    return ExperimentCard(experiment=experiment, scorecard=card, k=k)


def compare(a: ExperimentCard, b: ExperimentCard, component: str) -> Comparison:
    """B against A on `component`, tasks ordered regressions first (scorers' paired compare)."""
    comparison = compare_experiments(a.scorecard, b.scorecard, component)
    rank = {name: i for i, name in enumerate(CLASS_ORDER)}
    ordered = sorted(
        comparison.tasks, key=lambda t: (rank.get(t.cls, len(rank)), t.difference or 0, t.task_id)
    )
    return Comparison(
        comparison.component,
        comparison.a_id,
        comparison.b_id,
        ordered,
        comparison.interval,
        comparison.verdict,
        comparison.reason,
    )
