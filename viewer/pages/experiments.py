"""Experiments: the list, and one experiment's task x component scorecard."""

from __future__ import annotations

from dataclasses import dataclass

from litestar import Controller, Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException

from tracecard.scorers.infra import later_attempts
from tracecard.scorers.writers import MAX_LISTED_CELLS
from tracecard.traces import queries
from tracecard.traces.jobs import queued_cells
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store
from tracecard.viewer.rendering import page_response, render_html
from tracecard.viewer.robustness import robustness_section
from tracecard.viewer.runtime import in_thread, runtime_of
from tracecard.viewer.scorecards import experiment_card


@dataclass(frozen=True)
class ExperimentLine:
    """One experiment in the list, with its run counts and the one before it on its suite."""

    experiment: ExperimentRow
    runs: int
    failed: int
    previous: str | None


def _experiments_html(store: Store) -> str:
    experiments = queries.list_experiments(store)
    counts = queries.experiment_counts(store, [e.id for e in experiments])
    lines = []
    for index, experiment in enumerate(experiments):
        older = (e for e in experiments[index + 1 :] if e.suite_version == experiment.suite_version)
        previous = next(older, None)
        runs, failed = counts.get(experiment.id, (0, 0))
        lines.append(ExperimentLine(experiment, runs, failed, previous.id if previous else None))
    return render_html("experiments.html", experiments=lines)


def _experiment_html(store: Store, experiment_id: str) -> str:
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise NotFoundException(f"no experiment with id {experiment_id!r}")
    view = experiment_card(store, experiment)
    return render_html(
        "experiment.html",
        e=experiment,
        view=view,
        agreement=view.scorecard.agreement,
        later=later_attempts(view.scorecard.runs),  # the Markdown's "later attempt" cells
        listed=MAX_LISTED_CELLS,
        cells=queued_cells(store, experiment_id),
        robustness=robustness_section(store, experiment, view.scorecard),
    )


class ExperimentPages(Controller):
    """`/`, `/experiments`, `/experiments/{id}`."""

    path = "/"
    include_in_schema = False

    @get(["/", "/experiments"])
    async def experiments(self, state: State) -> Response[str]:
        """Every experiment, newest first, with a link to compare it with the previous one."""
        body = await in_thread(_experiments_html, runtime_of(state).store)
        return page_response(body)

    @get("/experiments/{experiment_id:str}")
    async def experiment(self, state: State, experiment_id: str) -> Response[str]:
        """The task x component matrix, intervals, flags, exports and agreement with people."""
        body = await in_thread(_experiment_html, runtime_of(state).store, experiment_id)
        return page_response(body)
