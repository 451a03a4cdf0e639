"""Suites, experiments, scorecards, comparisons, verdicts and rescoring."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from tracecard.scorers import to_csv, to_json, to_junit, to_markdown
from tracecard.scorers.registry import check_component
from tracecard.server.api.deps import runtime_of, service_call
from tracecard.server.evaluation.hooks import tasks_of
from tracecard.server.evaluation.service import (
    compare,
    create_experiment,
    experiment_drift,
    experiment_with_runs,
    find_suite,
    list_suites,
    rescore,
    scorecard_for,
    store_suite,
)
from tracecard.server.evaluation.tool_lists import check_suite_tools
from tracecard.server.evaluation.turns import next_turn
from tracecard.server.evaluation.views import comparison_view, config_names, with_drift
from tracecard.server.faults import FaultPlan, check_faults
from tracecard.server.faults.robustness import with_robustness
from tracecard.server.replay import ReplayPlan, check_replay, start_faults, start_replay
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runs.service import RunError, get_run, model_kinds, run_urls, run_view
from tracecard.traces.models import ExperimentRow
from tracecard.traces.queries import list_experiments
from tracecard.traces.verdicts import add_verdict


class ExperimentCreate(BaseModel):
    """Body of `POST /api/experiments`."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    config: dict[str, Any] = Field(default_factory=lambda: {"name": "default"})
    trials: int = 1
    # take the upstreams' answers from a source experiment's recording (docs/replay.md)
    replay: ReplayPlan | None = None
    # seeded fault rules applied to the agent's traffic (docs/replay.md, "Fault plans")
    faults: FaultPlan | None = None


class VerdictCreate(BaseModel):
    """Body of `POST /api/runs/{id}/verdicts`."""

    model_config = ConfigDict(extra="forbid")

    # Any component a registered scorer scores (third-party ones too), checked by the registry.
    component: Annotated[str, AfterValidator(check_component)]
    agree: bool
    note: str | None = Field(default=None, max_length=10_000)
    author: str | None = Field(default=None, max_length=200)


def experiment_summary(row: ExperimentRow) -> dict[str, Any]:
    """An experiment in a listing: what it ran, without its runs."""
    return {
        "id": row.id,
        "suite": row.suite_name,
        "suite_version": row.suite_version,
        "config": {"name": row.config_name, **row.config},
        "trials": row.trials,
        "environment": row.environment,
        "created_at": row.created_at.isoformat(),
    }


async def _thread(fn: Any, *args: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except RunError as exc:
        raise HTTPException(status_code=exc.status_code, detail=str(exc)) from exc


async def _check_tools(runtime: Any, suite_ref: str) -> list[str]:
    """Every tool the suite names must be on its servers' `tools/list` (422 with each unknown
    tool and a did-you-mean); servers that cannot be asked come back as warnings."""
    suite, _ = await _thread(find_suite, runtime.store, suite_ref)
    findings, _ = await check_suite_tools(
        runtime.settings, suite, f"suite {suite.name!r}", runtime.tool_lists
    )
    errors = [f.message for f in findings if f.level == "error"]
    if errors:
        raise HTTPException(
            status_code=422,
            detail="\n".join(errors) + "\nfix the suite or the configuration (no run was created)",
        )
    return [f.message for f in findings if f.level == "warning"]


async def _suite_faults(runtime: Any, suite_ref: str) -> FaultPlan | None:
    """The suite's `[faults]` plan, checked (a 422 naming the field when it is wrong)."""
    suite, _ = await _thread(find_suite, runtime.store, suite_ref)
    if suite.faults is None:
        return None
    try:
        return FaultPlan.model_validate(suite.faults)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        detail = f"suite {suite.name!r}: faults.{where}: {first['msg']}"
        raise HTTPException(status_code=422, detail=detail) from None


class SuiteController(Controller):
    path = "/api/suites"
    tags = ["suites"]

    @post("/", status_code=201, summary="Store a suite (TOML or JSON body); returns its version")
    async def create(self, state: State, request: Request[Any, Any, Any]) -> dict[str, Any]:
        body = (await request.body()).decode("utf-8", errors="replace")
        media = request.headers.get("content-type", "")
        fmt = "toml" if "toml" in media or not body.lstrip().startswith(("{", "[")) else "json"
        store = runtime_of(state).store
        suite, row = await _thread(store_suite, store, body, fmt, "request body")
        return {"name": suite.name, "version": row.version, "tasks": [t.id for t in suite.tasks]}

    @get("/", summary="Stored suites, newest first")
    async def index(self, state: State) -> dict[str, Any]:
        return {"suites": await _thread(list_suites, runtime_of(state).store)}


class ExperimentController(Controller):
    path = "/api/experiments"
    tags = ["experiments"]

    @post("/", status_code=201, summary="Create config x suite x k trials; returns every run")
    async def create(self, state: State, data: ExperimentCreate) -> dict[str, Any]:
        runtime = runtime_of(state)
        warnings = await _check_tools(runtime, data.suite)  # before any run exists
        faults = data.faults or await _suite_faults(runtime, data.suite)
        if data.replay is not None and faults is not None and data.faults is None:
            faults = None  # a replay of a faulted suite replays what the source saw
        if faults is not None:
            await service_call(check_faults(runtime, faults))
        replay = None
        if data.replay is not None:  # checked against its source before any run exists
            _suite, found = await _thread(find_suite, runtime.store, data.suite)
            replay = await service_call(
                check_replay(runtime, data.replay, found.version, data.trials)
            )
        environment: dict[str, Any] = {}  # experiments.environment (docs/replay.md)
        if replay is not None:
            environment["replay"] = replay.plan.stored()
        if faults is not None:  # with a replay: the faults change the replayed answers
            environment["faults"] = faults.stored()
        experiment, runs = await _thread(
            lambda: create_experiment(
                runtime.store,
                runtime.settings,
                data.suite,
                data.config,
                data.trials,
                environment or None,
            )
        )
        if replay is not None:  # each run's index, built now: serving never reads the database
            await start_replay(runtime, replay, runs)
        if faults is not None:
            start_faults(runtime, faults, runs)
        cache = tasks_of(runtime)
        suite, _ = await _thread(find_suite, runtime.store, experiment.suite_version)
        for run in runs:
            runtime.runs.remember(RunInfo.from_row(run))
            cache.put(run.id, suite.task(run.task_id))
        return {
            "id": experiment.id,
            "suite": experiment.suite_name,
            "suite_version": experiment.suite_version,
            "config": {"name": experiment.config_name, **experiment.config},
            "trials": experiment.trials,
            "environment": experiment.environment,
            "warnings": warnings,
            "runs": [
                {
                    "id": run.id,
                    "task_id": run.task_id,
                    "trial": run.trial,
                    "instruction": suite.task(run.task_id).instruction,
                    "urls": run_urls(runtime, run.id),
                    "models": model_kinds(runtime),
                    # W3C trace context of the run's root span: an agent that continues it
                    # (e.g. from TRACEPARENT, as `tracecard run` hands it) joins the run's trace
                    "traceparent": f"00-{run.trace_id}-{run.root_span_id}-01",
                }
                for run in runs
            ],
        }

    @get("/", summary="Experiments, newest first, a page at a time (offset, limit <= 500)")
    async def index(
        self, state: State, offset: int = 0, limit: int = 100, suite: str | None = None
    ) -> dict[str, Any]:
        if offset < 0 or not 1 <= limit <= 500:
            raise HTTPException(status_code=400, detail="offset >= 0 and 1 <= limit <= 500")
        store = runtime_of(state).store
        rows = await _thread(list_experiments, store, limit + 1, offset, suite)
        return {
            "experiments": [experiment_summary(row) for row in rows[:limit]],
            "next_offset": offset + limit if len(rows) > limit else None,
        }

    @get("/{experiment_id:str}", summary="An experiment and its runs")
    async def read(self, state: State, experiment_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        experiment, runs = await _thread(experiment_with_runs, runtime.store, experiment_id)
        return {
            "id": experiment.id,
            "suite": experiment.suite_name,
            "suite_version": experiment.suite_version,
            "config": {"name": experiment.config_name, **experiment.config},
            "trials": experiment.trials,
            "environment": experiment.environment,
            "runs": [run_view(runtime, r) for r in runs],
        }

    @get(
        "/{experiment_id:str}/{filename:str}",
        summary="Scorecard as scorecard.json, .csv, .md or .junit (JUnit XML; .xml the same)",
    )
    async def scorecard(
        self, state: State, request: Request[Any, Any, Any], experiment_id: str, filename: str
    ) -> Response[Any]:
        runtime = runtime_of(state)
        name, _, fmt = filename.partition(".")
        if name != "scorecard":
            raise HTTPException(status_code=404, detail=f"no such experiment file {filename!r}")
        await runtime.flush()
        card = await _thread(scorecard_for, runtime.store, experiment_id)
        if fmt in ("json", "md"):  # replay and faults: the robustness section (docs/replay.md)
            card = await _thread(with_robustness, runtime.store, card)
        writers = {
            "json": (to_json, "application/json"),
            "csv": (to_csv, "text/csv; charset=utf-8"),
            "md": (to_markdown, "text/markdown; charset=utf-8"),
            "xml": (to_junit, "application/xml"),
            "junit": (to_junit, "application/xml"),  # the same JUnit XML by its CI name
        }
        if fmt not in writers:
            raise HTTPException(status_code=404, detail=f"scorecard formats: {', '.join(writers)}")
        writer, media = writers[fmt]
        disposition = f'inline; filename="{experiment_id}-scorecard.{fmt}"'
        return Response(
            writer(card, str(request.base_url).rstrip("/")),
            media_type=media,
            headers={"Content-Disposition": disposition},
        )


class CompareController(Controller):
    path = "/api/compare"
    tags = ["experiments"]

    @get("/", summary="Paired comparison of two experiments on one suite")
    async def compare(
        self, state: State, a: str, b: str, component: str = "outcome", allow_drift: bool = False
    ) -> dict[str, Any]:
        store = runtime_of(state).store
        result = await _thread(compare, store, a, b, component)
        drift = await _thread(experiment_drift, store, [a, b])
        name_a, name_b = await _thread(config_names, store, a, b)
        view = {**comparison_view(result), "a_config": name_a, "b_config": name_b}
        return with_drift(view, drift, allow_drift)


class RunEvaluationController(Controller):
    path = "/api/runs"
    tags = ["runs"]

    @post("/{run_id:str}/rescore", status_code=200, summary="Score the stored trace again")
    async def rescore(self, state: State, run_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        run = await service_call(get_run(runtime, run_id))
        if run.task_id is None:
            raise HTTPException(status_code=409, detail=f"run {run_id} is not a trial of a task")
        await runtime.flush()
        results = await _thread(rescore, runtime.store, [run])
        if run_id not in results:
            raise HTTPException(
                status_code=409, detail=f"run {run_id} has status {run.status!r}: finish it first"
            )
        scores = results[run_id]
        return {
            "id": run_id,
            "scores": [c.model_dump(mode="json") for c in scores.components],
            "flags": scores.flags,
        }

    @post("/{run_id:str}/turns/next", status_code=200, summary="The next user message of a task")
    async def next_turn(self, state: State, run_id: str) -> dict[str, Any]:
        runtime = runtime_of(state)
        return await service_call(next_turn(runtime, run_id))

    @post("/{run_id:str}/verdicts", status_code=201, summary="Record a person's verdict")
    async def verdict(self, state: State, run_id: str, data: VerdictCreate) -> dict[str, Any]:
        runtime = runtime_of(state)
        await service_call(get_run(runtime, run_id))
        row = await _thread(
            lambda: add_verdict(
                runtime.store, run_id, data.component, data.agree, data.note, data.author
            )
        )
        return {
            "id": row.id,
            "run_id": run_id,
            "component": row.component,
            "agree": row.agree,
            "note": row.note,
            "author": row.author,
        }
