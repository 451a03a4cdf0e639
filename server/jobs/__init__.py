"""Trials as durable jobs (issue #21, docs/workers.md): each (experiment, task, trial) cell is a
DBOS workflow with checkpointed steps, run by `tracecard run`'s in-process worker or by
`tracecard worker` processes on any number of machines; attempts lost to a worker are kept
apart from the agent's failures.

The names below load on first use: the server imports the jobs API without DBOS."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracecard.server.jobs.cell import Cell, cell_workflow_id, run_cell
    from tracecard.server.jobs.engine import system_database_url
    from tracecard.server.jobs.local import JobOrchestrator

__all__ = ["Cell", "JobOrchestrator", "cell_workflow_id", "run_cell", "system_database_url"]
_MODULE = {
    "cell": ("Cell", "cell_workflow_id", "run_cell"),
    "engine": ("system_database_url",),
    "local": ("JobOrchestrator",),
}
_HOME = {name: module for module, names in _MODULE.items() for name in names}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(name)
    module = importlib.import_module(f"{__name__}.{_HOME[name]}")
    return getattr(module, name)
