"""Scorecards of stored experiments: the rows `tracecard.traces.experiments` reads, turned into
the one scorecard the API, the exports, the CLI and the viewer all show.

Pure: the rows come in already read (this module imports nothing from the store at run time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from .infra import infrastructure
from .repeats import DEFAULT_RESAMPLES
from .scorecard import RunRecord, Scorecard, Verdict, build_scorecard
from .suite import Suite, Task
from .types import ComponentScore

if TYPE_CHECKING:
    from tracecard.traces.experiments import StoredExperiment
    from tracecard.traces.models import RunRow, ScoreRow

__all__ = ["scorecard_of"]


def _suite(stored: StoredExperiment) -> Suite:
    """The stored suite document; rebuilt from the runs' task ids if it is missing or invalid."""
    task_ids = sorted({str(r.task_id) for r in stored.runs if r.task_id})
    if stored.suite is not None:
        try:
            suite: Suite | None = Suite.model_validate(stored.suite.document)
        except ValidationError:
            suite = None
        # (no task run counts, all lost to the infrastructure: the suite's tasks, none scored)
        if suite is not None and set(task_ids) <= {t.id for t in suite.tasks}:
            return suite
    tasks = [Task(id=t, instruction="") for t in task_ids] or [Task(id="none", instruction="")]
    return Suite(schema_version=1, name=stored.experiment.suite_name, tasks=tasks)


def _score(row: ScoreRow) -> ComponentScore:
    return ComponentScore(
        component=row.component,
        value=row.value,
        passed=row.passed,
        evidence=row.evidence,
        scorer=row.scorer,
        version=row.scorer_version,
    )


def _count(evidence: dict[str, object], key: str) -> int | None:
    value = evidence.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _record(run: RunRow, scores: list[ScoreRow], attempt: int | None = None) -> RunRecord:
    # calls and tokens as the efficiency scorer counted them (agent calls, model turns)
    process = next((s.evidence for s in scores if s.component == "efficiency"), {}) or {}
    return RunRecord(
        run_id=run.id,
        task_id=str(run.task_id),
        trial=run.trial,
        status=run.status,
        final_answer=run.final_answer,
        components=[_score(s) for s in scores],
        flags=list(run.flags or []),
        started_at=run.started_at,
        duration_s=(
            max(0.0, (run.finished_at - run.started_at).total_seconds())
            if run.started_at and run.finished_at
            else None
        ),
        calls=_count(process, "calls"),
        input_tokens=_count(process, "input_tokens"),
        output_tokens=_count(process, "output_tokens"),
        attempt=attempt,
    )


def scorecard_of(stored: StoredExperiment, resamples: int = DEFAULT_RESAMPLES) -> Scorecard:
    """The experiment's scorecard from its stored runs, scores and verdicts."""
    experiment = stored.experiment
    verdicts = [
        Verdict(
            run_id=v.run_id,
            component=v.component,
            agree=v.agree,
            note=v.note or "",
            author=v.author or "",
        )
        for run_verdicts in stored.verdicts.values()
        for v in run_verdicts
    ]
    return build_scorecard(
        _suite(stored),
        {"id": experiment.id, "config": {"name": experiment.config_name, **experiment.config}},
        [
            _record(run, stored.scores.get(run.id, []), stored.attempts.get(run.id))
            for run in stored.runs
        ],
        verdicts,
        resamples=resamples,
        infra=infrastructure(
            ((str(r.task_id), r.trial, str(r.end_reason)) for r in stored.infra),
            ((str(r.task_id), r.trial) for r in stored.runs),
        ),
    )
