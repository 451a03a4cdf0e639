"""`/suites/{version}/health`: the baselines' findings (`tracecard audit`, `_suite_audit.html`)
and task health across every configuration run on one suite version (`_suite_health.html`),
docs/audit.md."""

from __future__ import annotations

from litestar import Controller, Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException

from tracecard.scorers.stored import scorecard_of
from tracecard.scorers.task_health import LABELS, task_health
from tracecard.traces import queries
from tracecard.traces.experiments import stored_experiment
from tracecard.traces.store import Store
from tracecard.viewer.rendering import page_response, render_html
from tracecard.viewer.runtime import in_thread, runtime_of
from tracecard.viewer.suite_audit import suite_audit

__all__ = ["SuiteHealthPages"]

COMPONENTS = ("outcome", "invocation", "completion", "safety")


def _health_html(store: Store, version: str, component: str) -> str:
    rows = [
        e
        for e in queries.list_experiments(store, limit=500, suite=version)
        if e.suite_version == version and not e.config_name.startswith("audit:")
    ]
    audit = suite_audit(store, version)
    if not rows and audit is None:
        raise NotFoundException(f"no experiments of suite version {version!r}")
    cards = [scorecard_of(stored_experiment(store, row)) for row in rows]
    health = task_health(cards, component)
    names = {row.id: row.config_name for row in rows}
    if rows:
        suite = rows[0].suite_name
    elif audit is not None:
        suite = next(iter(audit.experiments.values())).suite_name
    return render_html(
        "suite_health.html",
        suite=suite,
        version=version,
        component=component,
        components=COMPONENTS,
        experiments=rows,
        names=names,
        health=health,
        labels=LABELS,
        flagged=[h for h in health if h.kind],
        audit=audit,
    )


class SuiteHealthPages(Controller):
    """`/suites/{version}/health`."""

    path = "/suites"
    include_in_schema = False

    @get("/{version:str}/health")
    async def health(self, state: State, version: str, component: str = "outcome") -> Response[str]:
        """The baselines' findings per task; tasks failed or passed by every configuration, and
        tasks whose noise is above signal."""
        if component not in COMPONENTS:
            component = "outcome"
        body = await in_thread(_health_html, runtime_of(state).store, version, component)
        return page_response(body)
