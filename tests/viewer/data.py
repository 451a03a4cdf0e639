"""A night of runs, built through the real store: two experiments on one suite, a live run and a
run whose tool result is hostile. Spans look like the proxy's (`tools/call <tool>`, semconv
attributes) and the probe runner's (verifier spans with the observed state); the scores are
the real scorers' over those stored spans, computed the way the server rescores a stored run
(`rescore`), with the suite's expectations."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tracecard.scorers import RunScores
from tracecard.server.evaluation.service import rescore, store_suite
from tracecard.traces import semconv as sc
from tracecard.traces.models import ExperimentRow, RunRow
from tracecard.traces.run_summary import end_run
from tracecard.traces.search import index_runs
from tracecard.traces.store import Store

SANDBOX = "/sandbox"
# What each task expects; every component is scored by the real scorer from it.
SUITE = r"""
schema_version = 1
name = "nightly"

[[tasks]]
id = "refund-order"
instruction = "Refund order A-1001 in full."
upstreams = ["tools"]
tools = ["lookup_order", "issue_refund"]
[tasks.invocation]
order = "subsequence"
[[tasks.invocation.calls]]
tool = "lookup_order"
arguments = { order_id = "A-1001" }
[[tasks.invocation.calls]]
tool = "issue_refund"
arguments = { order_id = "A-1001", amount = { number = 42.5, tolerance = 0.01 } }
[tasks.completion]
checks = [{ contains = "refund issued" }]
[tasks.outcome]
probes = [
  { id = "order", upstream = "tools", tool = "get_order", arguments = { order_id = "A-1001" } },
]
[[tasks.outcome.predicates]]
probe = "order"
path = "$.structuredContent.refunded"
op = "eq"
value = true
[[tasks.outcome.predicates]]
probe = "order"
path = "$.structuredContent.refunded_amount"
op = "approx"
value = 42.5
tolerance = 0.01
[tasks.efficiency]
optimal_calls = 2

[[tasks]]
id = "list-files"
instruction = "Summarise notes.txt in the sandbox."
upstreams = ["tools"]
tools = ["list_directory", "read_file"]
[[tasks.invocation.calls]]
tool = "read_file"
arguments = { path = { regex = 'notes\.txt$' } }
[tasks.completion]
checks = [{ contains = "Friday" }]
[tasks.outcome]
probes = [{ id = "reads", upstream = "tools", tool = "read_log", arguments = {} }]
[[tasks.outcome.predicates]]
probe = "reads"
path = "$.structuredContent.read"
op = "contains"
value = "/sandbox/notes.txt"

[[tasks]]
id = "weather"
instruction = "What is the forecast for Paris?"
upstreams = ["tools"]
tools = ["get_forecast"]
[[tasks.invocation.calls]]
tool = "get_forecast"
arguments = { city = "Paris" }
[tasks.completion]
checks = [{ contains = "21" }]
[tasks.outcome]
probes = [{ id = "asked", upstream = "tools", tool = "forecast_log", arguments = {} }]
predicates = [
  { probe = "asked", path = "$.structuredContent.cities", op = "contains", value = "Paris" },
]

[[tasks]]
id = "book-flight"
instruction = "Find a flight CDG to JFK."
upstreams = ["tools"]
tools = ["search_flights"]
[[tasks.invocation.calls]]
tool = "search_flights"
arguments = { from = "CDG", to = "JFK" }
[tasks.completion]
checks = [{ contains = "JFK" }]
[tasks.outcome]
probes = [{ id = "bookings", upstream = "tools", tool = "list_bookings", arguments = {} }]
predicates = [{ probe = "bookings", path = "$.structuredContent.bookings[0]", op = "exists" }]
"""
# The hostile run is a trial of its own suite: its scores' evidence quotes what it sent.
HOSTILE_SUITE = """
schema_version = 1
name = "hostile"

[[tasks]]
id = "hostile"
instruction = "Read the page."
tools = ["read"]
[[tasks.invocation.calls]]
tool = "read"
[tasks.completion]
checks = [{ contains = "summary" }]
"""
HOSTILE_RESULT = (
    '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1;alert(1)">'
    '<a href="javascript:window.__pwned=1">click me</a><style>body{display:none}</style>'
    + "A" * 200_000
)

# One call: (tool, arguments, result, error type or None, duration ms)
Call = tuple[str, dict[str, Any], Any, str | None, int]
ORDER = {"order_id": "A-1001"}
REFUND = {"order_id": "A-1001", "amount": 42.5}
LOOKUP: Call = ("lookup_order", ORDER, {"status": "delivered", "amount": 42.5}, None, 120)
SCRIPTS: dict[str, list[Call]] = {
    "refund.good": [LOOKUP, ("issue_refund", REFUND, {"refund_id": "R-1"}, None, 340)],
    "refund.wrong_amount": [
        LOOKUP,
        ("issue_refund", {**REFUND, "amount": 425}, {"refund_id": "R-2"}, None, 310),
    ],
    "refund.retry": [
        ("lookup_order", {"order_id": "A1001"}, "no such order: A1001", sc.ERR_TOOL, 80),
        LOOKUP,
        ("issue_refund", REFUND, {"refund_id": "R-3"}, None, 290),
    ],
    "refund.skip": [LOOKUP],
    "files.good": [
        ("list_directory", {"path": "/sandbox"}, ["notes.txt", "todo.md"], None, 40),
        ("read_file", {"path": "/sandbox/notes.txt"}, "Ship the viewer on Friday.", None, 35),
    ],
    "files.bad": [("list_directory", {"path": "/"}, ["etc", "home", "root"], None, 45)],
    "weather.good": [("get_forecast", {"city": "Paris"}, {"tmax": 21, "sky": "clear"}, None, 210)],
    "flight.timeout": [
        ("search_flights", {"from": "CDG", "to": "JFK"}, None, sc.ERR_TIMEOUT, 30_000)
    ],
}
# Per experiment, per task: the script of each of the five trials.
PLANS: dict[str, dict[str, list[str]]] = {
    "last-week": {
        "refund-order": ["refund.good"] * 2 + ["refund.retry"] + ["refund.good"] * 2,
        "list-files": ["files.good", "files.bad", "files.bad", "files.good", "files.bad"],
        "weather": ["weather.good"] * 5,
        "book-flight": ["flight.timeout"] * 5,
    },
    "last-night": {
        "refund-order": [
            "refund.good", "refund.wrong_amount", "refund.retry", "refund.skip", "refund.good",
        ],
        "list-files": ["files.good"] * 5,
        "weather": ["weather.good"] * 5,
        "book-flight": ["flight.timeout"] * 5,
    },
}
# What the agent answered (None: it never answered), and the state its probe observed after.
ANSWERS: dict[str, str | None] = {
    "refund.good": "Done: refund issued.",
    "refund.wrong_amount": "Done: refund issued.",  # the wrong amount: a hallucinated completion
    "refund.retry": "Done: refund issued.",
    "refund.skip": "Done: refund issued.",  # never refunded: a hallucinated completion
    "files.good": "The notes say: ship the viewer on Friday.",
    "files.bad": "I could not find notes.txt.",
    "weather.good": "Paris: 21 degrees and clear.",
    "flight.timeout": None,
}
# (probe tool, observed structuredContent) per script
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "refund.good": ("get_order", {"refunded": True, "refunded_amount": 42.5}),
    "refund.wrong_amount": ("get_order", {"refunded": True, "refunded_amount": 425}),
    "refund.retry": ("get_order", {"refunded": True, "refunded_amount": 42.5}),
    "refund.skip": ("get_order", {"refunded": False, "refunded_amount": 0}),
    "files.good": ("read_log", {"read": ["/sandbox/notes.txt"]}),
    "files.bad": ("read_log", {"read": []}),
    "weather.good": ("forecast_log", {"cities": ["Paris"]}),
    "flight.timeout": ("list_bookings", {"bookings": []}),
}
PROBE_IDS = {"get_order": "order", "read_log": "reads", "forecast_log": "asked"}


@dataclass
class Night:
    """Ids of what was built, for tests to open."""

    experiments: dict[str, str] = field(default_factory=dict)  # name -> experiment id
    runs: dict[tuple[str, str, int], str] = field(default_factory=dict)  # (exp, task, trial)
    live_run: str = ""
    hostile_run: str = ""
    spans: dict[str, list[str]] = field(default_factory=dict)  # run id -> tool-call span ids
    scores: dict[str, RunScores] = field(default_factory=dict)  # run id -> the real scores


def _hex(n: int) -> str:
    return secrets.token_hex(n)


def _span(run: RunRow, name: str, start: int, ms: int, parent: str, **extra: Any) -> dict[str, Any]:
    attributes = {sc.RUN_ID: run.id, **extra.pop("attributes", {})}
    return {
        "trace_id": run.trace_id,
        "span_id": extra.pop("span_id", None) or _hex(8),
        "parent_span_id": parent,
        "name": name,
        "kind": extra.pop("kind", sc.KIND_CLIENT),
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + ms * 1_000_000,
        "status": extra.pop("status", {"code": sc.STATUS_UNSET, "message": None}),
        "attributes": attributes,
        "events": [],
        "resource": extra.pop("resource", {"service.name": "tracecard"}),
        "scope": extra.pop("scope", "tracecard.proxy"),
        "run_id": run.id,
    }


def tool_span(run: RunRow, call: Call, start: int, parent: str, role: str = sc.ROLE_AGENT) -> dict:
    """A `tools/call <tool>` span as the proxy records it."""
    tool, arguments, result, error, ms = call
    attributes: dict[str, Any] = {
        sc.MCP_METHOD_NAME: "tools/call",
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: tool,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(arguments),
        sc.JSONRPC_REQUEST_ID: secrets.randbelow(1000),
        sc.UPSTREAM: "tools",
        sc.ROLE: role,
        sc.NETWORK_TRANSPORT: "tcp",
    }
    status = {"code": sc.STATUS_UNSET, "message": None}
    if result is not None:
        attributes[sc.GEN_AI_TOOL_CALL_RESULT] = json.dumps(
            {"content": [{"type": "text", "text": json.dumps(result)}], "isError": bool(error)}
        )
    if error:
        attributes[sc.ERROR_TYPE] = error
        status = {"code": sc.STATUS_ERROR, "message": error}
    return _span(run, f"tools/call {tool}", start, ms, parent, attributes=attributes, status=status)


def probe_span(run: RunRow, tool: str, observed: dict[str, Any], start: int) -> dict[str, Any]:
    """The verifier span the probe runner records for a tool probe (the observed state in it)."""
    call: Call = (tool, {}, observed, None, 50)
    span = tool_span(run, call, start, run.root_span_id, role=sc.ROLE_VERIFIER)
    result = {"content": [{"type": "text", "text": json.dumps(observed)}],
              "structuredContent": observed, "isError": False}
    span["attributes"] |= {
        sc.PROBE_ID: PROBE_IDS.get(tool, tool.split("_")[-1]),
        sc.PROBE_KIND: "tool",
        sc.PROBE_VALUE: json.dumps(result),
    }
    return span


def add_run(
    store: Store, run: RunRow, calls: list[Call], probe: tuple[str, dict[str, Any]] | None = None
) -> list[str]:
    """Store `run` with its root span, an agent LLM span, its tool calls and, after them, the
    verifier span of its probe."""
    store.add_run(run)
    start = int(run.created_at.timestamp() * 1e9)
    spans = [
        _span(run, f"invoke_agent {run.config_name}", start, 0, None, kind=sc.KIND_INTERNAL,
              span_id=run.root_span_id,
              attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT}),
        _span(run, "chat gpt-4.1", start + 2_000_000, 900, run.root_span_id,
              resource={"service.name": "demo-agent"}, scope="openai.agents",
              attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1"}),
    ]
    at = start + 905_000_000
    for call in calls:
        spans.append(tool_span(run, call, at, run.root_span_id))
        at += call[4] * 1_000_000 + 15_000_000
    if probe is not None:
        spans.append(probe_span(run, *probe, at))
    spans[0]["end_time_unix_nano"] = at + 60_000_000
    store.insert_spans(spans)
    return [s["span_id"] for s in spans]


def build_night(store: Store) -> Night:
    """Two experiments x four tasks x five trials, a live run and a hostile run, scored by the
    real scorers over their stored spans."""
    night = Night()
    _, suite = store_suite(store, SUITE, "toml", "nightly.toml")
    _, hostile_suite = store_suite(store, HOSTILE_SUITE, "toml", "hostile.toml")
    now = datetime.now(UTC).replace(microsecond=0)
    starts = {"last-week": now - timedelta(days=7), "last-night": now - timedelta(hours=10)}
    scored: list[RunRow] = []
    for name, started in starts.items():
        experiment = ExperimentRow(id=_hex(8), suite_name="nightly", suite_version=suite.version,
                                   config_name=name, config={"model": "gpt-4.1"}, trials=5,
                                   created_at=started)
        store.add_all([experiment])
        night.experiments[name] = experiment.id
        minute = 0
        for task, scripts in PLANS[name].items():
            for trial, script in enumerate(scripts):
                minute += 1
                created = started + timedelta(minutes=minute)
                run = RunRow(id=_hex(8), experiment_id=experiment.id, suite_name="nightly",
                             suite_version=suite.version, task_id=task, trial=trial,
                             config_name=name, status="timed_out" if "timeout" in script
                             else "finished", final_answer=ANSWERS[script],
                             trace_id=_hex(16), root_span_id=_hex(8), created_at=created,
                             started_at=created, finished_at=created + timedelta(seconds=3),
                             sandbox=SANDBOX)
                ids = add_run(store, run, SCRIPTS[script], PROBES[script])
                night.runs[(name, task, trial)] = run.id
                night.spans[run.id] = ids[2:-1]
                scored.append(run)
    hostile = RunRow(id=_hex(8), suite_name="hostile", suite_version=hostile_suite.version,
                     task_id="hostile", config_name="adhoc", status="finished",
                     trace_id=_hex(16), root_span_id=_hex(8), created_at=now - timedelta(hours=2),
                     final_answer='<img src=x onerror="window.__pwned=1">', sandbox=SANDBOX)
    tool = '<b onmouseover="window.__pwned=1">read</b>'
    ids = add_run(store, hostile, [(tool, {"q": "<script>window.__pwned=1</script>"},
                                    HOSTILE_RESULT, None, 30)])
    night.hostile_run = hostile.id
    night.spans[hostile.id] = ids[2:]
    scored.append(hostile)
    live = RunRow(id=_hex(8), task_id="weather", config_name="adhoc", status="running",
                  trace_id=_hex(16), root_span_id=_hex(8), created_at=now - timedelta(minutes=1))
    night.spans[live.id] = add_run(store, live, SCRIPTS["weather.good"])[2:]
    night.live_run = live.id
    # What the server does to a stored run: the registry's scorers over its spans, with its
    # suite's expectations; the scores, flags and evaluation events are stored.
    night.scores = rescore(store, scored)
    for run in scored:  # what the server stores when a run ends: its figures, its search text
        end_run(store, run.id)
    index_runs(store, [run.id for run in scored])
    return night
