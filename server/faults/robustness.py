"""An experiment's robustness under its environment (replay, faults): per fault kind and per
task, how often the agent recovered (`tracecard.scorers.robustness`, on the stored spans and
scores), and with faults vs without (store reads in `tracecard.traces.environment_reads`, shared
with the experiment page); for `GET /api/robustness`, `tracecard compare` and the scorecard's
`robustness` section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracecard.scorers.fault_comparison import fault_comparison
from tracecard.scorers.robustness import Robustness, robustness_of
from tracecard.server.errors import RunError
from tracecard.server.evaluation.scorecards import scorecard_for
from tracecard.traces import queries
from tracecard.traces.environment_reads import read_environment
from tracecard.traces.store import Store

if TYPE_CHECKING:
    from tracecard.scorers.scorecard import Scorecard
    from tracecard.traces.models import ExperimentRow


def experiment_robustness(
    store: Store, experiment: ExperimentRow, card: Scorecard | None = None
) -> Robustness:
    """The section, from the experiment's runs' spans and outcome scores; with faults, the
    paired comparison with the experiment that ran without them (`card`: this experiment's
    scorecard, when already made). The experiment page computes it the same way."""
    read = read_environment(store, experiment)
    found = robustness_of(read.environment, read.runs, read.spans, read.outcome_passed)
    if read.without is None:
        return found
    mine = card if card is not None else scorecard_for(store, experiment.id)
    paired = fault_comparison(scorecard_for(store, read.without.id), mine, read.chosen_by)
    return found.model_copy(update={"without_faults": paired})


def with_robustness(store: Store, card: Scorecard) -> Scorecard:
    """`card` with its `robustness` section when its experiment ran under an environment."""
    experiment = queries.get_experiment(store, card.experiment.id)
    if experiment is None or not experiment.environment:
        return card
    return card.model_copy(update={"robustness": experiment_robustness(store, experiment, card)})


def robustness(store: Store, experiment_id: str) -> dict[str, Any]:
    """`{experiment_id, faults, replay, kinds: [...], tasks: [...], without_faults, lines: [...]}`
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
