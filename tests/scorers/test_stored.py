"""The scorecard of a stored experiment (scorers.stored over traces.experiments), on the
store's in-memory double: the one scorecard the API, the exports and the viewer show."""

from __future__ import annotations

from tracecard.scorers import Suite, Task, scorecard_of, suite_version
from tracecard.traces import ExperimentRow, RunRow, ScoreRow, Store, SuiteRow, VerdictRow, queries
from tracecard.traces.experiments import stored_experiment

SUITE = Suite(
    schema_version=1,
    name="notes",
    tasks=[Task(id="echo", instruction="echo"), Task(id="sum", instruction="sum")],
)


def _experiment(store: Store, passes: dict[str, list[bool]], keep_suite: bool = True) -> str:
    version = suite_version(SUITE)
    rows: list[object] = [
        ExperimentRow(
            id="e1", suite_name="notes", suite_version=version, config_name="c", trials=2
        )
    ]
    if keep_suite:
        rows.append(SuiteRow(version=version, name="notes", document=SUITE.model_dump()))
    for task, results in passes.items():
        for trial, passed in enumerate(results):
            run_id = f"{task}-{trial}"
            rows.append(
                RunRow(
                    id=run_id,
                    trace_id=f"{trial:02d}" * 16,
                    root_span_id="00" * 8,
                    experiment_id="e1",
                    suite_name="notes",
                    suite_version=version,
                    task_id=task,
                    trial=trial,
                    status="finished",
                )
            )
            rows.append(
                ScoreRow(
                    run_id=run_id,
                    component="outcome",
                    value=float(passed),
                    passed=passed,
                    scorer="outcome",
                    scorer_version="1",
                )
            )
    store.add_all(rows)  # type: ignore[arg-type]
    return "e1"


def test_a_stored_experiment_scores_what_its_runs_did(memory_store: Store) -> None:
    _experiment(memory_store, {"echo": [True, True], "sum": [False, True]})
    memory_store.add_all([VerdictRow(run_id="sum-0", component="outcome", agree=False)])
    experiment = queries.get_experiment(memory_store, "e1")
    assert experiment is not None
    card = scorecard_of(stored_experiment(memory_store, experiment), resamples=100)
    by_task = {t.task_id: t.component("outcome") for t in card.tasks}
    assert by_task["echo"] is not None and by_task["echo"].pass_rate == 1.0
    assert by_task["sum"] is not None and by_task["sum"].pass_rate == 0.5
    assert by_task["sum"].flip
    assert card.suite.version == suite_version(SUITE)
    assert [(a.scorer, a.n, a.agree) for a in card.agreement] == [("outcome", 1, 0)]


def test_a_missing_suite_document_is_rebuilt_from_the_runs(memory_store: Store) -> None:
    _experiment(memory_store, {"echo": [False]}, keep_suite=False)
    experiment = queries.get_experiment(memory_store, "e1")
    assert experiment is not None
    card = scorecard_of(stored_experiment(memory_store, experiment), resamples=100)
    assert [t.task_id for t in card.tasks] == ["echo"]
    outcome = card.summary("outcome")
    assert outcome is not None and outcome.pass_rate.value == 0.0
