"""`tracecard audit SUITE --history`: task health across the experiments stored for the suite's
version (the audit's own baselines left out), read from the database."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from tracecard.scorers.task_health import LABELS, task_health
from tracecard.server.evaluation.service import scorecard_for
from tracecard.traces import queries
from tracecard.traces.store import Store

__all__ = ["history_document", "history_table"]


def history_document(
    store: Store, suite_name: str, version: str, component: str = "outcome"
) -> dict[str, Any]:
    """Every configuration's experiments on this suite version (not `audit:*` baselines), and
    per task its pass rate in each and its health finding."""
    rows = [
        e
        for e in queries.list_experiments(store, limit=500, suite=version)
        if not e.config_name.startswith("audit:")
    ]
    cards = [scorecard_for(store, e.id) for e in rows]
    health = task_health(cards, component)
    names = {e.id: e.config_name for e in rows}
    return {
        "suite": {"name": suite_name, "version": version},
        "component": component,
        "experiments": [{"id": e.id, "config": e.config_name} for e in rows],
        "tasks": [
            {
                "task_id": h.task_id,
                "kind": h.kind,
                "label": LABELS[h.kind] if h.kind else None,
                "reason": h.reason,
                "rates": {names[e]: r for e, r in h.rates.items()},
                "flips": h.flips,
                "configs": h.configs,
                "spread": round(h.spread, 6),
            }
            for h in health
        ],
        "counts": {k: sum(1 for h in health if h.kind == k) for k in LABELS},
    }


def history_table(document: dict[str, Any]) -> Table:
    """One row per flagged task: the finding and the pass rate in each configuration."""
    suite = document["suite"]
    flagged = [t for t in document["tasks"] if t["kind"]]
    table = Table(
        title=f"task health of suite {suite['name']} on {document['component']}: "
        f"{len(flagged)} of {len(document['tasks'])} tasks flagged across "
        f"{len(document['experiments'])} experiments",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("task", overflow="fold", max_width=28)
    table.add_column("health", no_wrap=True)
    table.add_column("why", overflow="fold", ratio=1)
    table.add_column("pass rate per configuration", overflow="fold", ratio=1)
    for task in flagged:
        rates = ", ".join(f"{name} {rate:.2f}" for name, rate in task["rates"].items())
        table.add_row(task["task_id"], task["label"], task["reason"], rates)
    return table
