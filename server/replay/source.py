"""Reading a source experiment: checks before any run exists, and each run's replay index.

Runs on a worker thread (it reads the database); the proxy only ever reads the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from tracecard.server.replay.index import Recorded, RunReplay, UpstreamIndex
from tracecard.server.replay.keys import http_key, mcp_key
from tracecard.server.replay.plan import ReplayPlan
from tracecard.server.runs.service import RunError
from tracecard.server.settings import MODEL_KINDS, Settings
from tracecard.traces import queries, semconv
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store

CODE_UPSTREAM = -32000
_DIRECTION = "tracecard.mcp.direction"
_HEADER_PREFIX = "http.response.header."
# Response headers a replayed body does not keep: it is stored decoded and whole.
_DROP_HEADERS = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "date"}
)


def check_plan(
    store: Store, settings: Settings, plan: ReplayPlan, suite_version: str, trials: int
) -> dict[tuple[str, int], RunRow]:
    """The source runs by (task, trial), or a one-line `RunError` naming what is wrong."""
    if plan.mode != "tools" and not any(u.kind in MODEL_KINDS for u in settings.upstreams.values()):
        raise RunError(
            f"--replay {plan.mode}: this server configures no model upstream (kind openai or "
            "anthropic) to replay; use --replay tools, or configure the model under [upstreams]",
            422,
        )
    unknown = sorted(set(plan.upstreams) - set(settings.upstreams))
    if unknown:
        raise RunError(
            f"replay names upstream(s) {', '.join(unknown)} that this server does not configure "
            f"(configured: {', '.join(sorted(settings.upstreams)) or 'none'})",
            422,
        )
    source = queries.get_experiment(store, plan.source)
    if source is None:
        raise RunError(f"replay source: no experiment {plan.source!r} (see `tracecard` list)", 404)
    if source.suite_version != suite_version:
        raise RunError(
            f"replay source {plan.source} ran suite version {source.suite_version[:12]}, not "
            f"{suite_version[:12]}: replay needs the same suite version (rerun the source on "
            "this suite, or replay onto the source's suite)",
            422,
        )
    runs = {(r.task_id or "", r.trial): r for r in queries.experiment_runs(store, source.id)}
    wanted = range(trials) if plan.trial is None else [plan.trial]
    tasks = sorted({task for task, _ in runs})
    for task in tasks:
        for trial in wanted:
            if (task, trial) not in runs:
                raise RunError(
                    f"replay source {plan.source} has no trial {trial} of task {task!r} "
                    f"(it ran {source.trials} trial(s)); use fewer trials or --replay-trial N",
                    422,
                )
    return runs


def build_indexes(
    store: Store,
    settings: Settings,
    plan: ReplayPlan,
    runs: Sequence[RunRow],
    sources: dict[tuple[str, int], RunRow],
) -> dict[str, RunReplay]:
    """One `RunReplay` per run, from its source run's stored spans."""
    replayed = [n for n, u in settings.upstreams.items() if _replays(plan, u.kind in MODEL_KINDS)]
    built: dict[str, RunReplay] = {}
    spans_by_source: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        trial = run.trial if plan.trial is None else plan.trial
        source = sources.get((run.task_id or "", trial))
        if source is None:
            continue
        spans = spans_by_source.get(source.id)
        if spans is None:
            spans = spans_by_source[source.id] = store.spans_for_run(source.id)
        built[run.id] = run_replay(run.id, source.id, plan, replayed, spans)
    return built


def _replays(plan: ReplayPlan, model: bool) -> bool:
    """Whether the plan's mode answers an upstream (a model one, or a tool one) from replay."""
    return plan.mode == "all" or (plan.mode == "model") == model


def run_replay(
    run_id: str, source_id: str, plan: ReplayPlan, upstreams: Iterable[str], spans: list[Any]
) -> RunReplay:
    """The index of one run from its source run's spans (in start order)."""
    by_upstream: dict[str, list[Recorded]] = {name: [] for name in upstreams}
    for span in spans:
        attributes = span.get("attributes") or {}
        upstream = attributes.get(semconv.UPSTREAM)
        if upstream not in by_upstream or attributes.get(semconv.PROBE_ID) is not None:
            continue
        if attributes.get(_DIRECTION):  # a server->client message: not an answer to give
            continue
        recorded = _recorded(span, attributes, plan.policy(upstream).ignore)
        if recorded is not None:
            by_upstream[upstream].append(recorded)
    indexes = {
        name: UpstreamIndex(plan.policy(name), recorded) for name, recorded in by_upstream.items()
    }
    return RunReplay(run_id, source_id, indexes)


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _recorded(span: dict[str, Any], attributes: dict[str, Any], ignore: list[str]) -> Any:
    if semconv.MRTR_ROUND in attributes:
        return None  # a round of a multi round-trip call: its parent span holds the answer
    role = str(attributes.get(semconv.ROLE) or semconv.ROLE_AGENT)
    usable = not attributes.get(semconv.TRUNCATED)
    method = attributes.get(semconv.MCP_METHOD_NAME)
    if isinstance(method, str):
        if method == "response":
            return None
        target = attributes.get(semconv.GEN_AI_TOOL_NAME)
        if method == "tools/call":
            params = {"arguments": _loads(attributes.get(semconv.GEN_AI_TOOL_CALL_ARGUMENTS))}
        else:
            params = _loads(attributes.get(semconv.RPC_PARAMS))
            target = _target(method, params)
        key = mcp_key(role, method, target, params, ignore)
        return Recorded(key, span["span_id"], _answer(span, attributes, method), usable=usable)
    http_method = attributes.get(semconv.HTTP_REQUEST_METHOD)
    if not isinstance(http_method, str) or semconv.URL_PATH not in attributes:
        return None
    body = attributes.get(semconv.REQUEST_BODY)
    arguments: Any = {} if body is None else _loads(body)
    if arguments is not None and not isinstance(arguments, dict):
        arguments = {"body": arguments}
    key = http_key(
        role,
        http_method,
        str(attributes[semconv.URL_PATH]),
        str(attributes.get(semconv.URL_QUERY) or ""),
        arguments,
        ignore,
    )
    status = attributes.get(semconv.HTTP_RESPONSE_STATUS_CODE)
    headers = [
        (name[len(_HEADER_PREFIX) :], str(value))
        for name, value in attributes.items()
        if name.startswith(_HEADER_PREFIX) and name[len(_HEADER_PREFIX) :] not in _DROP_HEADERS
    ]
    text = attributes.get(semconv.RESPONSE_BODY)
    recorded = Recorded(
        key,
        span["span_id"],
        status=int(status) if isinstance(status, int) else 0,
        headers=headers,
        body=str(text).encode() if text is not None else b"",
        usable=usable and isinstance(status, int),
    )
    if semconv.GEN_AI_PROVIDER_NAME in attributes:  # a model answer (the /llm/ proxy)
        _model_answer(recorded, attributes)
    return recorded


_NOT_STORED = {
    semconv.LLM_STORED_CUT: "its recorded answer was cut at the payload cap",
    semconv.LLM_STORED_BROKEN: "its recorded answer broke off",
    None: "its answer was not stored (recording.model_content = false, or recorded by a "
    "tracecard that did not store model answers)",
}


def _model_answer(recorded: Recorded, attributes: dict[str, Any]) -> None:
    """A model span's answer: usable only when stored whole (or redacted), never by the
    span's `tracecard.truncated`, which may name a cut prompt."""
    stored = attributes.get(semconv.LLM_RESPONSE_STORED)
    recorded.usable = stored in (semconv.LLM_STORED_WHOLE, semconv.LLM_STORED_REDACTED)
    recorded.usable = recorded.usable and recorded.status > 0
    recorded.unusable = _NOT_STORED.get(stored, _NOT_STORED[None])
    events = _loads(attributes.get(semconv.LLM_RESPONSE_EVENTS))
    if isinstance(events, list):
        recorded.events = [str(event).encode() for event in events]


def _target(method: str, params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    name = {"prompts/get": "name"}.get(method, "uri" if method.startswith("resources/") else "")
    value = params.get(name) if name else None
    return str(value) if value is not None else None


def _answer(span: dict[str, Any], attributes: dict[str, Any], method: str) -> dict[str, Any] | None:
    """The JSON-RPC answer a span recorded: a result, an error, or None (a notification)."""
    code = attributes.get(semconv.RPC_RESPONSE_STATUS_CODE)
    if code is not None:
        message = attributes.get(semconv.JSONRPC_ERROR_MESSAGE) or ""
        try:
            number = int(code)
        except ValueError:
            number = CODE_UPSTREAM
        return {"error": {"code": number, "message": str(message)}}
    key = semconv.GEN_AI_TOOL_CALL_RESULT if method == "tools/call" else semconv.RPC_RESULT
    if key in attributes:
        return {"result": _loads(attributes[key])}
    error = attributes.get(semconv.ERROR_TYPE)
    if error is not None:  # the upstream failed (timeout, unavailable): replayed as it was seen
        status = (span.get("status") or {}).get("message") or f"upstream failed ({error})"
        return {"error": {"code": CODE_UPSTREAM, "message": str(status)}}
    return None
