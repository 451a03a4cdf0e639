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
from tracecard.viewer.conversation import annotate_lines, build_model_view, has_model_spans
from tracecard.viewer.environment_chips import environment_chips
from tracecard.viewer.evidence import component_evidence
from tracecard.viewer.payloads import clock, payload, span_event
from tracecard.viewer.rendering import duration, html_response, page_response, render_html
from tracecard.viewer.runtime import in_thread, runtime_of
from tracecard.viewer.story import arguments_reader, build_story, spans_by_id
from tracecard.viewer.suite_audit import task_audit
from tracecard.viewer.task_view import run_task, task_view
from tracecard.viewer.trace_view import (
    build_trace,
    cited_span_ids,
    mark_events,
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
MAX_CITED: Final = 200  # cited calls read for the invocation tables' observed arguments


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


def _trace_context(store: Store, run_id: str, csrf_token: str) -> dict[str, Any]:
    run = _run(store, run_id)
    spans = _with_turns(store, queries.trace_outline(store, run))
    scores = sorted(
        store.scores_for_runs([run_id]).get(run_id, []), key=lambda s: component_key(s.component)
    )
    verdicts = verdicts_for_runs(store, [run_id]).get(run_id, [])
    agreement = agreement_rates(store, run.experiment_id)
    trace = build_trace(spans, scores)
    # the model side needs payloads (messages, requested calls): read them only when present
    full = store.spans_for_run(run_id) if has_model_spans(spans) else None
    model = build_model_view(full) if full is not None else None
    if model is not None:
        annotate_lines(trace.lines, model)
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
    mark_events(trace.lines, story.spans.values())
    return {
        "model": model,
        "story": story,
        "evidence": {s.component: component_evidence(s, task, arguments_of) for s in scores},
        "task": task_view(task) if task is not None else None,
        "audit": task_audit(store, run) if task is not None else None,  # the baselines' findings
        "run": run,
        "environment": environment_chips(store, run),  # replayed, faulted (docs/replay.md)
        "trace": trace,
        "rows": waterfall_rows(run.id, trace.lines, trace.start_ns, trace.end_ns),
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
        context = await in_thread(_trace_context, runtime.store, run_id, token)
        response = html_response(render_html("_trace_body.html", **context))
        if not context["live"]:
            response.status_code = STOP_POLLING
        return _with_cookie(response, set_cookie)

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
