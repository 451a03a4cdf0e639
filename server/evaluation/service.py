"""Suites, experiments, scoring and scorecards over the store (synchronous; used by the API
through a worker thread and by the CLI directly on the database)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from tracecard.scorers import (
    Comparison,
    ComparisonError,
    ComponentScore,
    RunFacts,
    RunScores,
    ScorerRegistry,
    Suite,
    SuiteError,
    Task,
    compare_experiments,
    default_registry,
    parse_suite,
    score_run,
    suite_version,
)
from tracecard.scorers.drift import ToolDrift, tool_drift
from tracecard.scorers.suite_cache import cached_suite
from tracecard.scorers.types import FINAL_STATUSES
from tracecard.scorers.verdict import scores_verdict
from tracecard.server.errors import RunError
from tracecard.server.evaluation.scorecards import experiment_row
from tracecard.server.evaluation.scorecards import scorecard_for as scorecard_for
from tracecard.server.settings import Settings
from tracecard.traces import queries, semconv
from tracecard.traces.models import ExperimentRow, RunRow, SuiteRow
from tracecard.traces.secrets import fingerprint, fingerprint_key
from tracecard.traces.store import Store

SCORABLE = FINAL_STATUSES  # a run is scored once it has ended, however it ended


def store_suite(store: Store, text: str, fmt: str, source: str) -> tuple[Suite, SuiteRow]:
    """Validate a suite document and store it; the same content is stored once (by version)."""
    if fmt not in ("toml", "json"):
        raise RunError(f"{source}: suite format must be toml or json, not {fmt!r}")
    try:
        suite = parse_suite(text, fmt, source)  # type: ignore[arg-type]
    except SuiteError as exc:
        raise RunError(str(exc), 422) from exc
    version = suite_version(suite)
    existing = queries.get_suite(store, version)
    if existing is not None:
        return suite, existing
    row = SuiteRow(version=version, name=suite.name, document=suite.model_dump(mode="json"))
    store.add_all([row])
    return suite, row


def _suite_from_row(row: SuiteRow) -> Suite:
    return parse_suite(orjson.dumps(row.document).decode(), "json", f"suite {row.name}")


def find_suite(store: Store, ref: str) -> tuple[Suite, SuiteRow]:
    """A suite by exact version, version prefix (>= 8 chars) or name (its latest version)."""
    row = queries.find_suite(store, ref)
    if row is None:
        raise RunError(f"no suite named or versioned {ref!r}; POST it to /api/suites first", 404)
    return _suite_from_row(row), row


def list_suites(store: Store) -> list[dict[str, Any]]:
    return [
        {
            "name": r.name,
            "version": r.version,
            "tasks": len(r.document.get("tasks", [])),
            "created_at": r.created_at.isoformat(),
        }
        for r in queries.list_suites(store)
    ]


def _check_upstreams(suite: Suite, settings: Settings, tasks: Sequence[Task]) -> None:
    missing = sorted({u for t in tasks for u in t.upstreams} - set(settings.upstreams))
    if missing:
        configured = ", ".join(sorted(settings.upstreams)) or "none"
        where = settings.config_path or "tracecard.toml (none was loaded: pass --config PATH)"
        raise RunError(
            f"suite {suite.name!r} uses upstream(s) {', '.join(missing)} that this server does not "
            f"configure (configured: {configured}); add [upstreams.{missing[0]}] to {where}",
            422,
        )


def create_experiment(
    store: Store,
    settings: Settings,
    suite_ref: str,
    config: dict[str, Any],
    trials: int,
    environment: dict[str, Any] | None = None,  # replay source, fault plan (stored as given)
) -> tuple[ExperimentRow, list[RunRow]]:
    """One config on one suite with `trials` runs per task, stored in one transaction."""
    # (the run service loads the runtime: not for the commands that only read scorecards)
    from tracecard.server.runs.service import new_run_row

    if not 1 <= trials <= 1000:
        raise RunError(f"trials must be between 1 and 1000, not {trials}")
    suite, suite_row = find_suite(store, suite_ref)
    _check_upstreams(suite, settings, suite.tasks)
    size = len(suite.tasks) * trials
    if size > settings.max_experiment_runs:
        raise RunError(
            f"an experiment of suite {suite.name!r} with {len(suite.tasks)} tasks x {trials} "
            f"trials is {size} runs, over the limit of {settings.max_experiment_runs}: use "
            f"at most {max(settings.max_experiment_runs // len(suite.tasks), 0)} trials, split "
            "the suite, or raise `max_experiment_runs` (TRACECARD_MAX_EXPERIMENT_RUNS)",
            422,
        )
    experiment = ExperimentRow(
        id=new_run_row(config={}).id,
        suite_name=suite.name,
        suite_version=suite_row.version,
        config_name=str(config.get("name") or "default"),
        config={k: v for k, v in config.items() if k != "name"},
        trials=trials,
        environment=environment,
    )
    runs = [
        new_run_row(
            config=config,
            task_id=task.id,
            trial=trial,
            experiment_id=experiment.id,
            suite_name=suite.name,
            suite_version=suite_row.version,
        )
        for task in suite.tasks
        for trial in range(trials)
    ]
    store.add_all([experiment, *runs])
    return experiment, runs


def new_task_run(
    store: Store,
    settings: Settings,
    *,
    suite_ref: str | None,
    task_id: str | None,
    experiment_id: str | None,
    config: dict[str, Any],
    trial: int,
) -> RunRow:
    """A run row for `POST /api/runs`, checked against its suite and experiment."""
    from tracecard.server.runs.service import new_run_row

    suite_name = suite_version_ = None
    if experiment_id is not None:
        experiment = experiment_row(store, experiment_id)
        suite_ref = experiment.suite_version
        config = {"name": experiment.config_name, **experiment.config, **config}
    if suite_ref is not None:
        suite, row = find_suite(store, suite_ref)
        suite_name, suite_version_ = suite.name, row.version
        if task_id is None:
            raise RunError("a run of a suite needs task_id")
        try:
            task = suite.task(task_id)
        except KeyError:
            known = ", ".join(t.id for t in suite.tasks)
            message = f"suite {suite.name!r} has no task {task_id!r} (tasks: {known})"
            raise RunError(message, 404) from None
        _check_upstreams(suite, settings, [task])
    return new_run_row(
        config=config,
        task_id=task_id,
        trial=trial,
        experiment_id=experiment_id,
        suite_name=suite_name,
        suite_version=suite_version_,
    )


def _suite_of(store: Store, run: RunRow, version: str) -> Suite:
    def read() -> tuple[str, dict[str, Any]] | None:
        row = queries.get_suite(store, version)
        return None if row is None else (row.name, row.document)

    suite = cached_suite(version, read)
    if suite is None:
        raise RunError(
            f"run {run.id} was a trial of suite {run.suite_name!r} version "
            f"{version[:12]}, which is no longer stored; store that suite again",
            409,
        )
    return suite


def task_of(store: Store, run: RunRow) -> Task | None:
    """The task a run was a trial of, or None for runs outside any suite."""
    if run.suite_version is None or run.task_id is None:
        return None
    return _suite_of(store, run, run.suite_version).task(run.task_id)


def evaluation_events(components: Sequence[ComponentScore]) -> list[dict[str, Any]]:
    """Scores as `gen_ai.evaluation.result` events for the run's root span."""
    now = time.time_ns()
    events = []
    for score in components:
        label = "not_evaluated" if score.passed is None else ("pass" if score.passed else "fail")
        attributes: dict[str, Any] = {
            semconv.EVAL_NAME: score.component,
            semconv.EVAL_SCORE_LABEL: label,
            semconv.EVAL_EXPLANATION: orjson.dumps(score.evidence).decode()[:4000],
            "tracecard.scorer": f"{score.scorer}@{score.version}",
        }
        if score.value is not None:
            attributes[semconv.EVAL_SCORE_VALUE] = score.value
        events.append(
            {"name": semconv.EVAL_EVENT_NAME, "time_unix_nano": now, "attributes": attributes}
        )
    return events


def score_rows(run: RunRow, scores: RunScores) -> list[dict[str, Any]]:
    """ScoreRow column values for a run's scores."""
    now = datetime.now(UTC)
    return [
        {
            "run_id": run.id,
            "component": c.component,
            "value": c.value,
            "passed": c.passed,
            "evidence": c.evidence,
            "scorer": c.scorer,
            "scorer_version": c.version,
            "suite_version": run.suite_version,
            "created_at": now,
        }
        for c in scores.components
    ]


def rescore(
    store: Store,
    runs: Sequence[RunRow],
    registry: ScorerRegistry | None = None,
    progress: Callable[[int], None] | None = None,
    chunk: int = 500,
) -> dict[str, RunScores]:
    """Score runs again from their stored traces (no tool is touched); replaces their scores."""
    registry = registry or default_registry()
    results: dict[str, RunScores] = {}
    tasks: dict[tuple[str, str], Task] = {}
    fingerprinter = functools.partial(fingerprint, fingerprint_key(store))
    for start in range(0, len(runs), chunk):
        batch = [r for r in runs[start : start + chunk] if r.status in SCORABLE]
        spans = store.spans_for_runs(batch)
        rows: dict[str, list[dict[str, Any]]] = {}
        flags: dict[str, list[str]] = {}
        events: dict[str, list[dict[str, Any]]] = {}
        verdicts: dict[str, str] = {}
        for run in batch:
            key = (run.suite_version or "", run.task_id or "")
            if key not in tasks:
                task = task_of(store, run)
                if task is None:
                    continue
                tasks[key] = task
            facts = RunFacts(
                status=run.status,  # type: ignore[arg-type]
                final_answer=run.final_answer,
                sandbox=run.sandbox,
                fingerprint=fingerprinter,
            )
            scores = score_run(tasks[key], spans[run.id], facts, registry)
            results[run.id] = scores
            rows[run.id] = score_rows(run, scores)
            flags[run.id] = scores.flags
            verdicts[run.id] = scores_verdict(scores.components).word
            root = next((s for s in spans[run.id] if s["span_id"] == run.root_span_id), None)
            if root is not None:
                kept = [e for e in root["events"] if e.get("name") != semconv.EVAL_EVENT_NAME]
                events[run.root_span_id] = kept + evaluation_events(scores.components)
        store.replace_scores(rows, flags, events, verdicts)
        if progress is not None:
            progress(min(start + chunk, len(runs)))
    return results


def experiment_with_runs(store: Store, experiment_id: str) -> tuple[ExperimentRow, list[RunRow]]:
    """An experiment and its runs by task and trial; a RunError (404) when it is unknown."""
    experiment = experiment_row(store, experiment_id)
    return experiment, queries.experiment_runs(store, experiment_id)


def experiment_drift(store: Store, experiment_ids: Sequence[str], chunk: int = 200) -> ToolDrift:
    """Tool-definition drift across every run of these experiments (from their tools/list
    spans): which tools changed, and which runs saw which definition."""
    runs = [r for e in experiment_ids for r in experiment_with_runs(store, e)[1]]
    listings: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(runs), chunk):
        for run_id, spans in store.spans_for_runs(runs[start : start + chunk]).items():
            listings[run_id] = [
                s
                for s in spans
                if (s.get("attributes") or {}).get(semconv.MCP_METHOD_NAME) == "tools/list"
            ]
    return tool_drift(listings)


def compare(store: Store, a: str, b: str, component: str = "outcome") -> Comparison:
    try:
        return compare_experiments(scorecard_for(store, a), scorecard_for(store, b), component)
    except ComparisonError as exc:
        raise RunError(str(exc), 422) from exc
