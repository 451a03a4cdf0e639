"""An experiment's stored scorecard, read with nothing else: what `tracecard gate` and `export`
need (the store and the scorecard builder), apart from the scoring service and its imports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracecard.scorers.stored import scorecard_of
from tracecard.server.errors import RunError
from tracecard.traces import queries
from tracecard.traces.experiments import stored_experiment

if TYPE_CHECKING:
    from tracecard.scorers.scorecard import Scorecard
    from tracecard.traces.models import ExperimentRow
    from tracecard.traces.store import Store

__all__ = ["experiment_row", "scorecard_for"]


def experiment_row(store: Store, experiment_id: str) -> ExperimentRow:
    """The experiment's row; a RunError (404) when there is none."""
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise RunError(f"no experiment with id {experiment_id!r}", 404)
    return experiment


def scorecard_for(store: Store, experiment_id: str) -> Scorecard:
    """The experiment's scorecard from stored scores and people's verdicts — the same one the
    viewer shows."""
    return scorecard_of(stored_experiment(store, experiment_row(store, experiment_id)))
