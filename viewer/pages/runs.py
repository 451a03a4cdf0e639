"""The runs list: filters that live in the URL and update the table in place, keyset pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlencode

from litestar import Controller, Request, Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException

from tracecard.scorers.flags import FLAGS
from tracecard.scorers.registry import component_key, component_names
from tracecard.scorers.types import LIVE_STATUSES, RUN_STATUSES
from tracecard.traces import queries
from tracecard.traces.models import RunRow, ScoreRow
from tracecard.traces.store import Store
from tracecard.viewer.rendering import html_response, page_response, render_html
from tracecard.viewer.runtime import in_thread, runtime_of

# URL parameter -> RunFilter field: short names keep shared URLs readable.
URL_FILTERS: Final = {
    "status": "status",
    "component": "failed_component",
    "task": "task_id",
    "config": "config_name",
    "tool": "tool_name",
    "error": "error_type",
    "flag": "flag",
    "experiment": "experiment_id",
}


@dataclass(frozen=True)
class RunLine:
    """A run in the table with its scores in component order."""

    run: RunRow
    scores: list[ScoreRow]

    @property
    def live(self) -> bool:
        """Still in progress: the row polls for its new state."""
        return self.run.status in LIVE_STATUSES


def run_lines(store: Store, runs: list[RunRow]) -> list[RunLine]:
    """Runs with their scores (one query for the page)."""
    scores = store.scores_for_runs([r.id for r in runs])
    return [
        RunLine(run, sorted(scores.get(run.id, []), key=lambda s: component_key(s.component)))
        for run in runs
    ]


def _filter_from(params: dict[str, str]) -> queries.RunFilter:
    values = {field: params.get(name) or None for name, field in URL_FILTERS.items()}
    return queries.RunFilter(**{k: v.strip() for k, v in values.items() if v and v.strip()})


def _runs_html(store: Store, params: dict[str, str], fragment: bool) -> str:
    run_filter = _filter_from(params)
    cursor = params.get("cursor") or None
    limit = params.get("limit", "")
    page_size = int(limit) if limit.isdigit() else queries.DEFAULT_PAGE_SIZE
    listing = queries.list_runs(store, run_filter, cursor=cursor, limit=page_size)
    shown = {name: params[name].strip() for name in URL_FILTERS if params.get(name, "").strip()}
    paging = {"limit": str(page_size)} if limit.isdigit() else {}
    next_url = (
        "/runs?" + urlencode({**shown, **paging, "cursor": listing.next_cursor})
        if listing.next_cursor
        else None
    )
    context = {
        "lines": run_lines(store, listing.runs),
        "filters": shown,
        "next_url": next_url,
        "first_url": "/runs?" + urlencode({**shown, **paging}) if cursor else None,
        "statuses": RUN_STATUSES,
        "components": component_names(),
        "flags": FLAGS,
    }
    return render_html("_runs_table.html" if fragment else "runs.html", **context)


def _options_html(store: Store) -> str:
    return render_html("_run_options.html", choices=queries.filter_choices(store))


def _row_html(store: Store, run_id: str) -> str:
    run = store.get_run(run_id)
    if run is None:
        raise NotFoundException(f"no run with id {run_id!r}")
    return render_html("_run_row.html", line=run_lines(store, [run])[0])


class RunPages(Controller):
    """`/runs` and its fragments."""

    path = "/runs"
    include_in_schema = False

    @get("/")
    async def runs(self, state: State, request: Request) -> Response[str]:  # type: ignore[type-arg]
        """Runs newest first; an htmx request gets only the table (the filters stay in place)."""
        params = {k: str(v) for k, v in request.query_params.items()}
        fragment = request.headers.get("hx-request") == "true" and request.headers.get(
            "hx-target"
        ) in ("runs-table",)
        body = await in_thread(_runs_html, runtime_of(state).store, params, fragment)
        response = html_response(body) if fragment else page_response(body)
        response.headers["Vary"] = "HX-Request, HX-Target"  # one URL, fragment or full page
        return response

    @get("/options")
    async def options(self, state: State) -> Response[str]:
        """Suggestions for the text filters (loaded after the page, off its critical path)."""
        return html_response(await in_thread(_options_html, runtime_of(state).store))

    @get("/{run_id:str}/row")
    async def row(self, state: State, run_id: str) -> Response[str]:
        """One row, polled every 2 s while its run is in progress."""
        return html_response(await in_thread(_row_html, runtime_of(state).store, run_id))
