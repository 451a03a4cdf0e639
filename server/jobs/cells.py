"""An experiment's cells by state (the queries live in `tracecard.traces.jobs`); an unknown
experiment is a 404 here."""

from __future__ import annotations

from typing import Any

from tracecard.server.errors import RunError
from tracecard.traces import jobs
from tracecard.traces.store import Store

__all__ = ["experiment_cells"]


def experiment_cells(store: Store, experiment_id: str) -> dict[str, Any]:
    """Every cell of the experiment, its attempts, counts by state, the workers."""
    try:
        return jobs.experiment_cells(store, experiment_id)
    except LookupError as exc:
        raise RunError(str(exc), 404) from exc
