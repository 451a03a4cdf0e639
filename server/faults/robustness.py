"""An experiment's robustness under its environment (replay, faults): per fault kind and per
task, how often the agent recovered (`tracecard.scorers.robustness`, on the stored spans and
scores); for `GET /api/robustness` and the scorecard's `robustness` section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracecard.scorers.robustness import Robustness, robustness_of
from tracecard.server.runs.service import RunError
from tracecard.traces import queries
from tracecard.traces.store import Store

if TYPE_CHECKING:
    from tracecard.scorers.scorecard import Scorecard
    from tracecard.traces.models import ExperimentRow


def experiment_robustness(store: Store, experiment: ExperimentRow) -> Robustness:
    """The section, read from the experiment's runs' spans and outcome scores."""
    runs = [r for r in queries.experiment_runs(store, experiment.id) if r.task_id]
    spans = store.spans_for_runs(runs)
    scores = store.scores_for_runs([r.id for r in runs])
    passed = {
        run_id: any(s.component == "outcome" and s.passed for s in found)
        for run_id, found in scores.items()
    }
    pairs = [(r.id, str(r.task_id)) for r in runs]
    return robustness_of(experiment.environment or {}, pairs, spans, passed)


def with_robustness(store: Store, card: Scorecard) -> Scorecard:
    """`card` with its `robustness` section when its experiment ran under an environment."""
    experiment = queries.get_experiment(store, card.experiment.id)
    if experiment is None or not experiment.environment:
        return card
    return card.model_copy(update={"robustness": experiment_robustness(store, experiment)})


def robustness(store: Store, experiment_id: str) -> dict[str, Any]:
    """`{experiment_id, faults, replay, kinds: [...], tasks: [...], lines: [...]}`
    (docs/replay.md)."""
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise RunError(f"no experiment {experiment_id!r}", 404)
    found = experiment_robustness(store, experiment)
    return {
        "experiment_id": experiment_id,
        **found.model_dump(mode="json"),
        "lines": [kind.line() for kind in found.kinds],
    }
