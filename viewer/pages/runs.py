"""The runs list for triage: verdicts with their first failing reason, filters and search that
live in the URL and update the table in place, sorting, a total, keyset pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final
from urllib.parse import urlencode

from litestar import Controller, Request, Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException

from tracecard.scorers.flags import FLAGS
from tracecard.scorers.registry import component_key, component_names
from tracecard.scorers.types import LIVE_STATUSES, RUN_STATUSES
from tracecard.scorers.verdict import VERDICTS, RunVerdict, run_verdict
from tracecard.traces import queries
from tracecard.traces.models import RunRow, ScoreRow
from tracecard.traces.run_list import COUNT_CAP, SORTS, RunList, RunQuery, find_runs
from tracecard.traces.run_summary import RunSummary, summarize_runs
from tracecard.traces.store import Store
from tracecard.viewer.environment_chips import EnvironmentChip, chips_by_run
from tracecard.viewer.rendering import html_response, page_response, render_html
from tracecard.viewer.runtime import in_thread, runtime_of

# URL parameters that filter (their RunQuery field has the same name, `q` is `text`).
URL_FILTERS: Final = (
    "status",
    "component",
    "task",
    "config",
    "tool",
    "error",
    "flag",
    "experiment",
    "since",
    "until",
    "q",
)
PAGE_SIZE: Final = 50


@dataclass(frozen=True)
class RunLine:
    """A run in the table: its scores in component order, verdict, and figures (summarised
    from its spans while it runs)."""

    run: RunRow
    scores: list[ScoreRow]
    verdict: RunVerdict
    summary: RunSummary | None = None
    environment: tuple[EnvironmentChip, ...] = ()  # replayed, faulted (docs/replay.md)

    @property
    def live(self) -> bool:
        """Still in progress: the row polls for its new state (and stops once it ended)."""
        return self.run.status in LIVE_STATUSES

    def figure(self, name: str) -> int:
        source = self.summary if self.summary is not None else self.run
        return int(getattr(source, name))

    @property
    def upstreams(self) -> list[str]:
        return self.summary.upstreams if self.summary is not None else list(self.run.upstreams)

    @property
    def client(self) -> str | None:
        return self.run.client or (self.summary.client if self.summary is not None else None)

    @property
    def title(self) -> str:
        """What the run is: its task, else its config name, else "ad hoc"."""
        if self.run.task_id:
            return self.run.task_id
        return "ad hoc" if self.run.adhoc_key is not None else self.run.config_name


def run_lines(store: Store, runs: list[RunRow]) -> list[RunLine]:
    """Runs with their scores and verdicts (one query for the page, one more for live runs)."""
    scores = store.scores_for_runs([r.id for r in runs])
    live = summarize_runs(store, [r for r in runs if r.status in LIVE_STATUSES])
    chips = chips_by_run(store, runs)
    lines = []
    for run in runs:
        mine = sorted(scores.get(run.id, []), key=lambda s: component_key(s.component))
        verdict = run_verdict(run.status, mine)
        environment = tuple(chips.get(run.id, ()))
        lines.append(RunLine(run, mine, verdict, live.get(run.id), environment))
    return lines


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def query_from(params: dict[str, str]) -> RunQuery:
    """The RunQuery of the URL's parameters (unknown values filter nothing)."""
    values = {name: params.get(name, "").strip() for name in URL_FILTERS}
    sort = values.get("sort") or params.get("sort", "created")
    return RunQuery(
        status=values["status"] or None,
        component=values["component"] or None,
        task=values["task"] or None,
        config=values["config"] or None,
        tool=values["tool"] or None,
        error=values["error"] or None,
        flag=values["flag"] or None,
        experiment=values["experiment"] or None,
        since=_moment(values["since"]),
        until=_moment(values["until"]),
        text=values["q"] or None,
        sort=sort if sort in SORTS else "created",
        descending=params.get("order", "desc") != "asc",
    )


def _runs_html(store: Store, params: dict[str, str], fragment: bool) -> str:
    query = query_from(params)
    cursor = params.get("cursor") or None
    limit = params.get("limit", "")
    page_size = int(limit) if limit.isdigit() else PAGE_SIZE
    listing = find_runs(store, query, cursor=cursor, limit=page_size)
    shown = {name: params[name].strip() for name in URL_FILTERS if params.get(name, "").strip()}
    order = {"sort": query.sort, "order": "desc" if query.descending else "asc"}
    ordered = shown | (order if query.sort != "created" or not query.descending else {})
    paging = {"limit": str(page_size)} if limit.isdigit() else {}

    def sort_url(name: str) -> str:
        flip = name == query.sort and query.descending
        return "/runs?" + urlencode({**shown, "sort": name, "order": "asc" if flip else "desc"})

    next_url = (
        "/runs?" + urlencode({**ordered, **paging, "cursor": listing.next_cursor})
        if listing.next_cursor
        else None
    )
    context = {
        "lines": run_lines(store, listing.runs),
        "total_label": _total_label(listing),
        "filters": shown,
        "query": query,
        "sort_url": sort_url,
        "next_url": next_url,
        "first_url": "/runs?" + urlencode({**ordered, **paging}) if cursor else None,
        "statuses": RUN_STATUSES,
        "verdicts": VERDICTS,
        "components": component_names(),
        "flags": FLAGS,
    }
    return render_html("_runs_table.html" if fragment else "runs.html", **context)


def _total_label(listing: RunList) -> str:
    """"1 run", "1,234 runs", "More than 10,000 runs", "At least 2,500 runs"."""
    if listing.total > COUNT_CAP:
        return f"More than {COUNT_CAP:,} runs"
    word = "run" if listing.total == 1 else "runs"
    return f"{listing.total:,} {word}" if listing.exact else f"At least {listing.total:,} runs"


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
