"""The experiment page's robustness section (docs/replay.md, "Robustness"): read from the store
(`tracecard.traces.environment_reads`) and computed by the pure scorers, as the server computes
it for the API, the CLI and the exports, with the page's scorecards."""

from __future__ import annotations

from tracecard.scorers.fault_comparison import fault_comparison
from tracecard.scorers.robustness import Robustness, robustness_of
from tracecard.scorers.scorecard import Scorecard
from tracecard.traces.environment_reads import read_environment
from tracecard.traces.models import ExperimentRow
from tracecard.traces.store import Store
from tracecard.viewer.scorecards import experiment_card

__all__ = ["robustness_section"]


def robustness_section(
    store: Store, experiment: ExperimentRow, card: Scorecard
) -> Robustness | None:
    """The section of an experiment that had replay or faults (`card`: its scorecard)."""
    if not experiment.environment:
        return None
    read = read_environment(store, experiment)
    found = robustness_of(read.environment, read.runs, read.spans, read.outcome_passed)
    if read.without is None:
        return found
    without = experiment_card(store, read.without).scorecard
    return found.model_copy(
        update={"without_faults": fault_comparison(without, card, read.chosen_by)}
    )
