"""An experiment's robustness under its environment (replay, faults): per fault kind and per
task, how often the agent recovered (`tracecard.scorers.robustness`, on the stored spans and
scores), and with faults vs without: the paired comparison with the experiment of the same suite
version that ran without them; for `GET /api/robustness`, `tracecard compare` and the
scorecard's `robustness` section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tracecard.scorers.fault_comparison import fault_comparison
from tracecard.scorers.robustness import FaultComparison, Robustness, robustness_of
from tracecard.server.evaluation.scorecards import scorecard_for
from tracecard.server.runs.service import RunError
from tracecard.traces import queries
from tracecard.traces.store import Store

if TYPE_CHECKING:
    from tracecard.scorers.scorecard import Scorecard
    from tracecard.traces.models import ExperimentRow


def _faulted(experiment: ExperimentRow) -> bool:
    return bool((experiment.environment or {}).get("faults"))


def without_faults(store: Store, experiment: ExperimentRow) -> tuple[str, str] | None:
    """The experiment to pair a faulted one with, and why it: its replay source when that ran
    without faults (the same recorded world), else the nearest experiment of the same config
    name on the same suite version without faults (the latest before it, else the first after).
    Chosen from what the user created, never from anything a run sent."""
    if not _faulted(experiment):
        return None
    replay = (experiment.environment or {}).get("replay")
    if isinstance(replay, Mapping) and replay.get("source"):
        source = queries.get_experiment(store, str(replay["source"]))
        if source and source.suite_version == experiment.suite_version and not _faulted(source):
            return source.id, "its replay source"
    rows = queries.list_experiments(store, limit=500, suite=experiment.suite_version)
    mates = [
        row
        for row in rows
        if row.id != experiment.id
        and row.suite_version == experiment.suite_version
        and row.config_name == experiment.config_name
        and not _faulted(row)
    ]
    before = [row for row in mates if row.created_at <= experiment.created_at]
    found = before[0] if before else (mates[-1] if mates else None)  # rows: newest first
    if found is None:
        return None
    return found.id, f"the nearest run of {experiment.config_name!r} without faults"


def _paired(
    store: Store, experiment: ExperimentRow, card: Scorecard | None
) -> FaultComparison | None:
    pair = without_faults(store, experiment)
    if pair is None:
        return None
    mine = card if card is not None else scorecard_for(store, experiment.id)
    return fault_comparison(scorecard_for(store, pair[0]), mine, pair[1])


def experiment_robustness(
    store: Store, experiment: ExperimentRow, card: Scorecard | None = None
) -> Robustness:
    """The section, read from the experiment's runs' spans and outcome scores; with faults, the
    paired comparison against `without_faults` (`card`: this experiment's scorecard, if made)."""
    runs = [r for r in queries.experiment_runs(store, experiment.id) if r.task_id]
    spans = store.spans_for_runs(runs)
    scores = store.scores_for_runs([r.id for r in runs])
    passed = {
        run_id: any(s.component == "outcome" and s.passed for s in found)
        for run_id, found in scores.items()
    }
    pairs = [(r.id, str(r.task_id)) for r in runs]
    found = robustness_of(experiment.environment or {}, pairs, spans, passed)
    return found.model_copy(update={"without_faults": _paired(store, experiment, card)})


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
