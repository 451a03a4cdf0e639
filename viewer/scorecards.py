"""An experiment's scorecard for its pages: the one `tracecard.scorers.stored` builds for the
API and the exports, plus the largest k its cells report."""

from __future__ import annotations

from dataclasses import dataclass

from tracecard.scorers.scorecard import Scorecard
from tracecard.scorers.stored import scorecard_of
from tracecard.traces.experiments import stored_experiment
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store


@dataclass(frozen=True)
class ExperimentCard:
    """An experiment with its scorecard and the largest k its cells report."""

    experiment: ExperimentRow
    scorecard: Scorecard
    k: int


def experiment_card(store: Store, experiment: ExperimentRow) -> ExperimentCard:
    """Build the experiment's scorecard from its stored runs, scores and verdicts."""
    card = scorecard_of(stored_experiment(store, experiment))
    k = max((s.evaluated for t in card.tasks for s in t.components), default=0)
    return ExperimentCard(experiment=experiment, scorecard=card, k=k)
