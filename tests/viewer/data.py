"""A night of runs, built through the real store: two experiments on one suite, a live run and a
run whose tool result is hostile. Spans look like the proxy's (`tools/call <tool>`, semconv
attributes); scores carry evidence that cites span ids, as the scorers write it."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tracecard.traces import semconv as sc
from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SuiteRow
from tracecard.traces.store import Store

SUITE_VERSION = "c0ffee" * 10 + "abcd"
SUITE = {
    "schema_version": 1,
    "name": "nightly",
    "tasks": [
        {"id": "refund-order", "instruction": "Refund order A-1001 in full."},
        {"id": "list-files", "instruction": "Summarise notes.txt in the sandbox."},
        {"id": "weather", "instruction": "What is the forecast for Paris?"},
        {"id": "book-flight", "instruction": "Find a flight CDG to JFK."},
    ],
}
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
PASSING = {"refund.good", "refund.retry", "files.good", "weather.good"}


@dataclass
class Night:
    """Ids of what was built, for tests to open."""

    experiments: dict[str, str] = field(default_factory=dict)  # name -> experiment id
    runs: dict[tuple[str, str, int], str] = field(default_factory=dict)  # (exp, task, trial)
    live_run: str = ""
    hostile_run: str = ""
    spans: dict[str, list[str]] = field(default_factory=dict)  # run id -> tool-call span ids


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


def _scores(run: RunRow, script: str, calls: list[str], probe: str) -> list[ScoreRow]:
    passed = script in PASSING
    tool_error = script == "flight.timeout"
    evidence = {
        "invocation": {"expected": [{"tool": script.split(".")[0], "span_id": calls[-1]}],
                       "extra_calls": [{"span_id": s} for s in calls[:-1] if not passed]},
        "completion": {"checks": [{"kind": "contains", "ok": not tool_error}],
                       "note": "substring check on the final answer"},
        "outcome": {"predicates": [{"probe": "state", "path": "$.refunded", "span_id": probe,
                                    "holds": passed}]},
        "safety": {"violations": [{"rule": "outside-sandbox", "severity": "major",
                                   "span_id": calls[0]}] if script == "files.bad" else []},
    }
    values = {
        "invocation": 1.0 if passed else 0.5,
        "completion": 0.0 if tool_error else 1.0,
        "outcome": 1.0 if passed else 0.0,
        "safety": 0.2 if script == "files.bad" else 1.0,
    }
    return [
        ScoreRow(run_id=run.id, component=c, value=v, passed=v >= 1.0, evidence=evidence[c],
                 scorer=c, scorer_version="1", suite_version=SUITE_VERSION)
        for c, v in values.items()
    ]


def add_run(store: Store, run: RunRow, calls: list[Call], *, probe: bool = True) -> list[str]:
    """Store `run` with its root span, an agent LLM span, its tool calls and a verifier span."""
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
    if probe:
        spans.append(tool_span(run, ("get_order", ORDER, {"refunded": True}, None, 50), at,
                               run.root_span_id, role=sc.ROLE_VERIFIER))
    spans[0]["end_time_unix_nano"] = at + 60_000_000
    store.insert_spans(spans)
    return [s["span_id"] for s in spans]


def build_night(store: Store) -> Night:
    """Two experiments x four tasks x five trials, a live run and a hostile run."""
    night = Night()
    store.add_all([SuiteRow(version=SUITE_VERSION, name="nightly", document=SUITE)])
    now = datetime.now(UTC).replace(microsecond=0)
    starts = {"last-week": now - timedelta(days=7), "last-night": now - timedelta(hours=10)}
    for name, started in starts.items():
        experiment = ExperimentRow(id=_hex(8), suite_name="nightly", suite_version=SUITE_VERSION,
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
                             suite_version=SUITE_VERSION, task_id=task, trial=trial,
                             config_name=name, status="timed_out" if "timeout" in script
                             else "finished", final_answer="Done: refund issued.",
                             trace_id=_hex(16), root_span_id=_hex(8), created_at=created,
                             started_at=created, finished_at=created + timedelta(seconds=3),
                             flags=["hallucinated_completion"] if script == "refund.skip" else [])
                ids = add_run(store, run, SCRIPTS[script])
                calls, probe = ids[2:-1], ids[-1]
                night.runs[(name, task, trial)] = run.id
                night.spans[run.id] = calls
                store.add_all(_scores(run, script, calls, probe))
    hostile = RunRow(id=_hex(8), task_id="hostile", config_name="adhoc", status="finished",
                     trace_id=_hex(16), root_span_id=_hex(8), created_at=now - timedelta(hours=2),
                     final_answer='<img src=x onerror="window.__pwned=1">')
    tool = '<b onmouseover="window.__pwned=1">read</b>'
    ids = add_run(store, hostile, [(tool, {"q": "<script>window.__pwned=1</script>"},
                                    HOSTILE_RESULT, None, 30)], probe=False)
    store.add_all([ScoreRow(run_id=hostile.id, component="outcome", value=0.0, passed=False,
                            evidence={"why": "<script>window.__pwned=1</script>",
                                      "span_id": ids[2]}, scorer="outcome", scorer_version="1")])
    night.hostile_run = hostile.id
    night.spans[hostile.id] = ids[2:]
    live = RunRow(id=_hex(8), task_id="weather", config_name="adhoc", status="running",
                  trace_id=_hex(16), root_span_id=_hex(8), created_at=now - timedelta(minutes=1))
    night.spans[live.id] = add_run(store, live, SCRIPTS["weather.good"], probe=False)[2:]
    night.live_run = live.id
    return night
