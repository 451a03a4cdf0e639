"""A run's trace: the waterfall, call details on demand, evidence, verdicts, live updates."""

from __future__ import annotations

from typing import Any, Final

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, ValidationException
from litestar.response import Redirect

from tracecard.scorers.registry import check_component, component_key, component_names
from tracecard.scorers.types import LIVE_STATUSES
from tracecard.scorers.verdict import run_verdict
from tracecard.traces import queries
from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow, ScoreRow
from tracecard.traces.store import Store
from tracecard.traces.verdicts import add_verdict, agreement_rates, verdicts_for_runs
from tracecard.viewer import csrf
from tracecard.viewer.citing import citations
from tracecard.viewer.conversation import (
    ModelView,
    annotate_lines,
    build_model_view,
    has_model_spans,
)
from tracecard.viewer.environment_chips import environment_chips
from tracecard.viewer.evidence import component_evidence
from tracecard.viewer.payloads import clock, payload, span_event
from tracecard.viewer.rendering import duration, html_response, page_response, render_html
from tracecard.viewer.runtime import in_thread, runtime_of
from tracecard.viewer.story import arguments_reader, build_story, spans_by_id
from tracecard.viewer.suite_audit import task_audit
from tracecard.viewer.task_view import run_task, task_view
from tracecard.viewer.trace_view import (
    TraceView,
    build_trace,
    cited_span_ids,
    span_error,
    status_word,
)
from tracecard.viewer.waterfall import waterfall_rows

# Shown first in a call's detail, in this order; every other attribute follows in a table.
CALL_PAYLOADS: Final = (
    (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "arguments"),
    (sc.RPC_PARAMS, "params"),
    (sc.GEN_AI_TOOL_CALL_RESULT, "result"),
    (sc.RPC_RESULT, "result"),
    (sc.REQUEST_BODY, "request body"),
    (sc.RESPONSE_BODY, "response body"),
    (sc.PROBE_VALUE, "probe observed"),
)
MAX_NOTE: Final = 4000
STOP_POLLING: Final = 286  # htmx stops an `every` trigger on this status (and still swaps)
MAX_CITED: Final = 200
# A long waterfall renders this many rows with the page, then this many more per request
# (`/runs/{id}/rows`, on scrolling to its end or following a permalink to a later span).
WATERFALL_ROWS: Final = 300  # cited calls read for the invocation tables' observed arguments


def _run(store: Store, run_id: str) -> RunRow:
    run = store.get_run(run_id)
    if run is None:
        raise NotFoundException(f"no run with id {run_id!r}")
    return run


def _with_turns(store: Store, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The outline has no payload attributes; a multi-turn run's few turn spans get theirs back
    # (index and user message) so the waterfall can label each turn.
    for span in spans:
        if str(span.get("name", "")).startswith("turn ") and not span["attributes"]:
            full = store.span(span["span_id"])
            attributes = (full or {}).get("attributes") or {}
            for key in (sc.TURN_INDEX, sc.TURN_USER):
                if key in attributes:
                    span["attributes"][key] = attributes[key]
    return spans


def _rows_wanted(value: str | None, total: int) -> int:
    """How many waterfall rows to render: the first WATERFALL_ROWS, or as many as the page
    already shows (`rows`, sent by the live refresh: rows a person loaded stay)."""
    asked = int(value) if value is not None and value.isdigit() else 0
    return min(total, max(WATERFALL_ROWS, asked))


def _scores(store: Store, run_id: str) -> list[ScoreRow]:
    found = store.scores_for_runs([run_id]).get(run_id, [])
    return sorted(found, key=lambda s: component_key(s.component))


def _waterfall(
    store: Store, run: RunRow, scores: list[ScoreRow]
) -> tuple[list[dict[str, Any]], TraceView, list[dict[str, Any]] | None, ModelView | None]:
    """The outline, its waterfall model with evidence and model chips, and (when the run has
    model spans) its spans in full and the model view."""
    spans = _with_turns(store, queries.trace_outline(store, run))
    trace = build_trace(spans, scores)
    # the model side needs payloads (messages, requested calls): read them only when present
    full = store.spans_for_run(run.id) if has_model_spans(spans) else None
    model = build_model_view(full) if full is not None else None
    if model is not None:
        annotate_lines(trace.lines, model)
    return spans, trace, full, model


def _trace_context(
    store: Store, run_id: str, csrf_token: str, rows_shown: str | None = None
) -> dict[str, Any]:
    run = _run(store, run_id)
    scores = _scores(store, run_id)
    verdicts = verdicts_for_runs(store, [run_id]).get(run_id, [])
    agreement = agreement_rates(store, run.experiment_id)
    spans, trace, full, model = _waterfall(store, run, scores)
    shown = _rows_wanted(rows_shown, len(trace.lines))
    task = run_task(store, run)
    story = build_story(store, run, spans, full, model)
    # the calls the invocation evidence cites that the story did not read: one query, bounded
    cited = [
        span_id
        for s in scores
        if s.component == "invocation"
        for span_id in cited_span_ids(s.evidence)
        if span_id not in story.spans
    ][:MAX_CITED]
    known = {**story.spans, **{s["span_id"]: s for s in spans_by_id(store, cited)}}
    arguments_of = arguments_reader(known)
    return {
        "model": model,
        "story": story,
        "evidence": {s.component: component_evidence(s, task, arguments_of) for s in scores},
        "task": task_view(task) if task is not None else None,
        "audit": task_audit(store, run) if task is not None else None,  # the baselines' findings
        "run": run,
        "environment": environment_chips(store, run),  # replayed, faulted (docs/replay.md)
        "trace": trace,
        "rows": waterfall_rows(run.id, trace.lines[:shown], trace.start_ns, trace.end_ns),
        "rows_shown": shown,
        "scores": scores,
        # the same verdict and first reason as the runs list: "finished" alone read as a pass
        "verdict": run_verdict(run.status, scores),
        "verdicts": verdicts,
        "agreement": agreement,
        "live": run.status in LIVE_STATUSES,
        # The verdict form: the components this run was scored on, else every registered one.
        "components": [s.component for s in scores] or component_names(),
        "csrf_field": csrf.FIELD,
        "csrf_token": csrf_token,
    }


def _trace_html(store: Store, run_id: str, template: str, csrf_token: str) -> str:
    return render_html(template, **_trace_context(store, run_id, csrf_token))


def _rows_html(store: Store, run_id: str, start: int, until: str | None) -> str:
    """The waterfall's rows from `start`: WATERFALL_ROWS of them, or through span `until`
    (a permalink to a span not shown yet), then the "more" row for the rest."""
    run = _run(store, run_id)
    _spans, trace, _full, _model = _waterfall(store, run, _scores(store, run_id))
    lines = trace.lines
    start = max(0, min(start, len(lines)))
    end = start + WATERFALL_ROWS
    if until:
        index = next((i for i, line in enumerate(lines) if line.span_id == until), -1)
        end = max(end, index + 1 + WATERFALL_ROWS // 2)
    end = min(end, len(lines))
    rows = waterfall_rows(run.id, lines[start:end], trace.start_ns, trace.end_ns)
    return render_html(
        "_waterfall_more.html", run=run, rows=rows, rows_shown=end, trace=trace, oob=True
    )


def _with_cookie(response: Response[str], set_cookie: str | None) -> Response[str]:
    """Give a browser its CSRF nonce along with the first page whose forms need it."""
    if set_cookie is not None:
        response.headers["set-cookie"] = set_cookie
    return response


def _span(store: Store, run_id: str, span_id: str) -> dict[str, Any]:
    span = store.span(span_id)
    if span is None:
        raise NotFoundException(f"no span {span_id!r} in run {run_id!r}")
    run = _run(store, run_id)
    if span.get("run_id") != run_id and span.get("trace_id") != run.trace_id:
        raise NotFoundException(f"no span {span_id!r} in run {run_id!r}")
    return span


def _detail_html(store: Store, run_id: str, span_id: str) -> str:
    span = _span(store, run_id, span_id)
    attributes: dict[str, Any] = dict(span.get("attributes") or {})
    redacted = any(isinstance(v, str) and "[redacted:" in v for v in attributes.values())
    payloads = []
    for key, label in CALL_PAYLOADS:
        if key in attributes:
            shown = payload(key, attributes.pop(key))
            payloads.append((label, shown))
    rest = [
        (key, payload(key, value, collapse_above=1024)) for key, value in sorted(attributes.items())
    ]
    scores: list[ScoreRow] = store.scores_for_runs([run_id]).get(run_id, [])
    # the tables kept are about this span: its arguments are the only observed ones they show
    known = {span_id: span}
    task = run_task(store, _run(store, run_id)) if scores else None
    return render_html(
        "_span_detail.html",
        run_id=run_id,
        span=span,
        error=span_error(span),
        status=status_word((span.get("status") or {}).get("code")),
        started=clock(int(span.get("start_time_unix_nano") or 0)),
        took=duration(
            None
            if span.get("end_time_unix_nano") is None
            else int(span["end_time_unix_nano"]) - int(span.get("start_time_unix_nano") or 0)
        ),
        method=attributes.get(sc.MCP_METHOD_NAME),
        tool=attributes.get(sc.GEN_AI_TOOL_NAME),
        payloads=payloads,
        attributes=rest,
        events=[span_event(e) for e in span.get("events") or [] if isinstance(e, dict)],
        citations=citations(span_id, scores, task, arguments_reader(known)),
        redacted=redacted,
    )


def _payload_text(store: Store, run_id: str, span_id: str, key: str) -> str:
    span = _span(store, run_id, span_id)
    attributes = span.get("attributes") or {}
    if key not in attributes:
        raise NotFoundException(f"span {span_id!r} has no attribute {key!r}")
    return render_html("_payload_text.html", text=payload(key, attributes[key]).text)


def _record_verdict(store: Store, run_id: str, form: dict[str, str], csrf_token: str) -> str:
    component = form.get("component", "").strip()
    if not component:
        raise ValidationException("choose the component the verdict is about")
    try:
        check_component(component)
    except ValueError as exc:
        raise ValidationException(str(exc)) from None
    if form.get("agree") not in ("yes", "no"):
        raise ValidationException("say whether you agree with the evaluator (yes or no)")
    note = form.get("note", "").strip()[:MAX_NOTE]
    author = form.get("author", "").strip()[:200]
    _run(store, run_id)
    add_verdict(store, run_id, component, form["agree"] == "yes", note, author)
    return _trace_html(store, run_id, "_verdicts.html", csrf_token)


class TracePages(Controller):
    """`/runs/{run_id}` and its fragments."""

    path = "/runs/{run_id:str}"
    include_in_schema = False

    @get("/")
    async def trace(self, state: State, request: Request, run_id: str) -> Response[str]:  # type: ignore[type-arg]
        """The span waterfall, the scores with their evidence, and the verdict form."""
        runtime = runtime_of(state)
        token, set_cookie = csrf.form_token(request, runtime.csrf_key)
        body = await in_thread(_trace_html, runtime.store, run_id, "trace.html", token)
        return _with_cookie(page_response(body), set_cookie)

    @get("/live")
    async def live(self, state: State, request: Request, run_id: str) -> Response[str]:  # type: ignore[type-arg]
        """The trace body, polled every 2 s while the run is in progress and morphed into the
        page; once the run has ended it answers 286, which stops htmx's polling."""
        runtime = runtime_of(state)
        token, set_cookie = csrf.form_token(request, runtime.csrf_key)
        shown = request.query_params.get("rows")
        context = await in_thread(_trace_context, runtime.store, run_id, token, shown)
        response = html_response(render_html("_trace_body.html", **context))
        if not context["live"]:
            response.status_code = STOP_POLLING
        return _with_cookie(response, set_cookie)

    @get("/rows")
    async def rows(
        self, state: State, run_id: str, start: int = 0, until: str | None = None
    ) -> Response[str]:
        """The next rows of a long waterfall (only the first WATERFALL_ROWS come with the
        page); `until`: at least through that span."""
        store = runtime_of(state).store
        return html_response(await in_thread(_rows_html, store, run_id, start, until))

    @get("/spans/{span_id:str}")
    async def span_detail(self, state: State, run_id: str, span_id: str) -> Response[str]:
        """One call's method, tool, arguments, result, error, attributes and cited evidence."""
        store = runtime_of(state).store
        return html_response(await in_thread(_detail_html, store, run_id, span_id))

    @get("/spans/{span_id:str}/payload")
    async def payload_text(
        self, state: State, run_id: str, span_id: str, key: str
    ) -> Response[str]:
        """A large attribute in full, fetched when its collapsed block is opened."""
        store = runtime_of(state).store
        return html_response(await in_thread(_payload_text, store, run_id, span_id, key))

    @post("/verdicts", status_code=200)
    async def verdict(self, state: State, request: Request, run_id: str) -> Response[Any]:  # type: ignore[type-arg]
        """Record a person's verdict; htmx gets the verdicts and agreement back in place.

        The CSRF token was checked before the request got here (tracecard.server.security)."""
        form = {k: str(v) for k, v in (await request.form()).items()}
        token = form.get(csrf.FIELD, "")
        body = await in_thread(_record_verdict, runtime_of(state).store, run_id, form, token)
        if request.headers.get("hx-request") == "true":
            return html_response(body)
        return Redirect(f"/runs/{run_id}#verdicts", status_code=303)
