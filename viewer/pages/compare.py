"""Comparisons: trials of one task side by side, and one experiment against another."""

from __future__ import annotations

from typing import Final

from litestar import Controller, Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, ValidationException
from litestar.params import Parameter

from tracecard.scorers.compare import ComparisonError
from tracecard.scorers.registry import check_component, component_names
from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store
from tracecard.traces.trial_calls import first_agent_calls
from tracecard.traces.verdicts import verdicts_for_runs
from tracecard.viewer.align import ALIGN_CAP
from tracecard.viewer.compare_charts import history_chart, per_task_chart, values_card
from tracecard.viewer.compare_rows import aligned_rows
from tracecard.viewer.compare_runs import compare_runs
from tracecard.viewer.experiment_compare import compare_all
from tracecard.viewer.rendering import page_response, render_html
from tracecard.viewer.runtime import in_thread, runtime_of

MAX_TRIALS: Final = 12
RUN_IDS: Final = Parameter(query="run", default=None)


def _compare_runs_html(
    store: Store, run_ids: list[str], experiment: str | None, task: str | None
) -> str:
    if experiment and task:
        runs = queries.experiment_runs(store, experiment, task)
    else:
        runs = queries.runs_by_id(store, run_ids)
    if not runs:
        raise NotFoundException("no runs to compare: give ?experiment=ID&task=ID or ?run=ID&run=ID")
    runs = runs[:MAX_TRIALS]
    # Only the calls the page aligns are read (and how many each trial made in all).
    calls = first_agent_calls(store, runs, ALIGN_CAP)
    scores = store.scores_for_runs([r.id for r in runs])
    people = verdicts_for_runs(store, [r.id for r in runs])
    view = compare_runs(runs, calls.spans, scores, calls.totals, calls.next_call, people)
    # the breadcrumb names the experiment (and the task) the trials belong to, however chosen
    experiments = {r.experiment_id for r in runs}
    shared = experiments.pop() if len(experiments) == 1 else None
    tasks = {r.task_id for r in runs}
    return render_html(
        "compare_runs.html",
        view=view,
        rows=aligned_rows(view),
        experiment=queries.get_experiment(store, shared) if shared else None,
        task=task or (tasks.pop() if len(tasks) == 1 else None),
    )


def _default_pair(experiments: list[ExperimentRow]) -> tuple[str | None, str | None]:
    """The newest experiment and the one before it on the same suite version: what the empty
    page offers to compare (never an experiment with itself)."""
    for index, newer in enumerate(experiments):
        older = (e for e in experiments[index + 1 :] if e.suite_version == newer.suite_version)
        previous = next(older, None)
        if previous is not None:
            return previous.id, newer.id
    return None, None


def _compare_experiments_html(store: Store, a: str | None, b: str | None, component: str) -> str:
    experiments = queries.list_experiments(store)
    chosen = bool(a and b)
    if not chosen:
        a, b = _default_pair(experiments)
    context: dict[str, object] = {
        "experiments": experiments,
        "a": a,
        "b": b,
        "component": component,
        "components": component_names(),
        "comparison": None,
        "problem": None,
    }
    if chosen and a == b:
        context["problem"] = "A and B are the same experiment: choose two different experiments"
    elif chosen and a and b:
        side_a, side_b = queries.get_experiment(store, a), queries.get_experiment(store, b)
        if side_a is None or side_b is None:
            missing = a if side_a is None else b
            raise NotFoundException(f"no experiment with id {missing!r}")
        card_a, card_b = values_card(store, side_a), values_card(store, side_b)
        context.update(side_a=side_a, side_b=side_b)
        try:
            view = compare_all(card_a, card_b, component)
        except ComparisonError as exc:
            context["problem"] = str(exc)
        else:
            context["comparison"] = view.headline
            context["view"] = view
            context["chart"] = per_task_chart(view, side_a, side_b)
            cards = {side_a.id: card_a, side_b.id: card_b}  # A first, then B
            context["history"] = history_chart(store, experiments, cards, component)
    return render_html("compare_experiments.html", **context)


class ComparePages(Controller):
    """`/compare/runs` and `/compare/experiments`."""

    path = "/compare"
    include_in_schema = False

    @get("/runs")
    async def runs(
        self,
        state: State,
        run: list[str] | None = RUN_IDS,
        experiment: str | None = None,
        task: str | None = None,
    ) -> Response[str]:
        """Trials side by side, calls aligned, the first divergence marked."""
        store = runtime_of(state).store
        body = await in_thread(_compare_runs_html, store, run or [], experiment, task)
        return page_response(body)

    @get("/experiments")
    async def experiments(
        self,
        state: State,
        a: str | None = None,
        b: str | None = None,
        component: str = "outcome",
    ) -> Response[str]:
        """B against A: paired per-task classes, regressions first, the verdict and interval."""
        try:
            check_component(component)
        except ValueError as exc:
            raise ValidationException(str(exc)) from None
        store = runtime_of(state).store
        return page_response(await in_thread(_compare_experiments_html, store, a, b, component))
