"""The plain-`sqlite3` reader behind `tracecard gate` reads an experiment exactly as the store
does: the same rows, values and types, the same runs left out, the same scorecard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracecard.scorers import Suite, Task, scorecard_of, suite_version
from tracecard.traces import ExperimentRow, RunRow, ScoreRow, Store, SuiteRow, VerdictRow, queries
from tracecard.traces.experiments import stored_experiment
from tracecard.traces.models import JobAttemptRow
from tracecard.traces.sqlite_read import SqliteRows

SUITE = Suite(
    schema_version=1,
    name="notes",
    tasks=[Task(id="echo", instruction="echo"), Task(id="sum", instruction="sum")],
)
START = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _store(path: Path) -> Store:
    version = suite_version(SUITE)
    store = Store(f"sqlite:///{path}")
    store.create_schema()
    rows: list[Any] = [
        ExperimentRow(
            id="e1",
            suite_name="notes",
            suite_version=version,
            config_name="c",
            config={"model": "m", "temperature": 0.5},
            trials=2,
            environment={"replay": {"source": "e0"}},
        ),
        SuiteRow(version=version, name="notes", document=SUITE.model_dump()),
    ]

    same = {"experiment_id": "e1", "suite_name": "notes", "suite_version": version}

    def run(run_id: str, task: str, trial: int, minute: int, **more: Any) -> None:
        at = START + timedelta(minutes=minute)
        times = {"created_at": at, "started_at": at, "finished_at": at + timedelta(seconds=1.5)}
        ids = {"id": run_id, "trace_id": f"{minute:02d}" * 16, "root_span_id": "00" * 8}
        rows.append(RunRow(task_id=task, trial=trial, **ids, **times, **same, **more))
        for component, passed in (("outcome", trial == 0), ("completion", None)):
            rows.append(
                ScoreRow(
                    run_id=run_id,
                    component=component,
                    value=None if passed is None else float(passed),
                    passed=passed,
                    evidence={"why": [component, run_id], "calls": 3},
                    scorer=component,
                    scorer_version="1",
                )
            )

    run("echo-0", "echo", 0, 1, status="finished", final_answer="hi", flags=["lucky_outcome"])
    run("echo-1", "echo", 1, 2, status="errored", error="boom")
    run("sum-0-a", "sum", 0, 3, status="errored", end_reason="worker_lost")  # infra: left out
    run("sum-0-b", "sum", 0, 4, status="finished")  # the jobs' second attempt of the cell
    run("sum-1-a", "sum", 1, 5, status="finished")
    run("sum-1-b", "sum", 1, 6, status="finished")  # a rerun replaces what it reruns
    for run_id, attempt in (("sum-1-a", 1), ("sum-1-b", 2), ("sum-0-b", 2)):
        rows.append(
            JobAttemptRow(
                run_id=run_id,
                experiment_id="e1",
                task_id="sum",
                trial=0,
                attempt=attempt,
                executor="w",
            )
        )
    rows.append(VerdictRow(run_id="echo-0", component="outcome", agree=False, note="no"))
    rows.append(VerdictRow(run_id="echo-0", component="outcome", agree=True, author="ann"))
    store.add_all(rows)
    return store


def _values(row: Any) -> dict[str, Any]:
    return dict(vars(row)) if not hasattr(row, "model_dump") else row.model_dump()


def test_the_sqlite_reader_reads_what_the_store_reads(tmp_path: Path) -> None:
    store = _store(tmp_path / "t.db")
    try:
        experiment = queries.get_experiment(store, "e1")
        assert experiment is not None
        expected = stored_experiment(store, experiment)
    finally:
        store.dispose()
    rows = SqliteRows(str(tmp_path / "t.db"))
    try:
        assert rows.revisions() and rows.experiment("nope") is None
        read = rows.experiment("e1")
        assert read is not None and _values(read) == _values(experiment)
        got = rows.stored_experiment(read)
        assert rows.latest_of_config("c") == "e1" and rows.latest_of_config("c", "other") is None
    finally:
        rows.close()
    assert (
        [r.id for r in got.runs]
        == [r.id for r in expected.runs]
        == [
            "echo-0",
            "echo-1",
            "sum-0-b",
            "sum-1-b",
        ]
    )
    assert [_values(r) for r in got.runs] == [_values(r) for r in expected.runs]
    assert [r.id for r in got.infra] == [r.id for r in expected.infra] == ["sum-0-a"]
    assert got.attempts == expected.attempts
    assert expected.suite is not None and got.suite is not None
    assert _values(got.suite) == _values(expected.suite)
    for by_run, wanted in ((got.scores, expected.scores), (got.verdicts, expected.verdicts)):
        assert {k: [_values(v) for v in vs] for k, vs in by_run.items() if vs} == {
            k: [_values(v) for v in vs] for k, vs in wanted.items() if vs
        }
    assert isinstance(got.runs[0].created_at, datetime) and got.runs[0].flags == ["lucky_outcome"]
    card, same = scorecard_of(got, resamples=50), scorecard_of(expected, resamples=50)
    assert card.model_dump(mode="json") == same.model_dump(mode="json")
