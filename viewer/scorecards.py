"""An experiment's scorecard for its pages: the one `tracecard.scorers.stored` builds for the
API and the exports, plus the k its pass@k / pass^k columns report (as the exports do)."""

from __future__ import annotations

from dataclasses import dataclass

from tracecard.scorers.scorecard import Scorecard
from tracecard.scorers.stored import scorecard_of
from tracecard.scorers.writers import largest_k
from tracecard.traces.experiments import stored_experiment
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store


@dataclass(frozen=True)
class ExperimentCard:
    """An experiment with its scorecard and the k its summary reports pass@k / pass^k at."""

    experiment: ExperimentRow
    scorecard: Scorecard
    k: int


def experiment_card(store: Store, experiment: ExperimentRow) -> ExperimentCard:
    """Build the experiment's scorecard from its stored runs, scores and verdicts."""
    card = scorecard_of(stored_experiment(store, experiment))
    return ExperimentCard(experiment=experiment, scorecard=card, k=largest_k(card))
