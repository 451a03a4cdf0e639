"""#14.15: the trials comparison of long trials reads and aligns only the first `ALIGN_CAP` calls
of each trial, counts the rest, and says plainly what it left out; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from tests.viewer.conftest import IN_PROCESS_URL
from tracecard.server.app import asgi_app
from tracecard.server.settings import Settings
from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store
from tracecard.traces.trial_calls import first_agent_calls
from tracecard.viewer.align import ALIGN_CAP
from tracecard.viewer.compare_runs import _is_agent_call, compare_runs

T0 = 10**18  # nanoseconds


def _run(store: Store, trial: int) -> RunRow:
    run = RunRow(
        id=f"{trial:016x}", experiment_id="e" * 16, task_id="long", trial=trial,
        trace_id=f"{trial:032x}", root_span_id=f"{trial:04x}{'f' * 12}", status="finished",
    )  # fmt: skip
    store.add_run(run)
    return run


def _span(run: RunRow, n: int, attributes: dict[str, Any], **fields: Any) -> dict[str, Any]:
    start = fields.pop("start", T0 + n * 1000)
    span = {
        "trace_id": run.trace_id,
        "span_id": f"{run.trial:04x}{n:012x}",
        "parent_span_id": run.root_span_id,
        "name": "tools/call read",
        "kind": 3,
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + 10,
        "status": {"code": 0},
        "attributes": {sc.RUN_ID: run.id, sc.ROLE: sc.ROLE_AGENT, **attributes},
        "run_id": run.id,
    }
    span.update(fields)
    return span


def _call(run: RunRow, n: int, tool: str = "read", **fields: Any) -> dict[str, Any]:
    arguments = {
        sc.MCP_METHOD_NAME: "tools/call",
        sc.GEN_AI_TOOL_NAME: tool,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"n": n}),
    }
    return _span(run, n, arguments, **fields)


def _long_trial(store: Store, trial: int, calls: int, skip: int | None = None) -> RunRow:
    """`calls` tool calls, stored in shuffled order: the page must pick the first by start time."""
    run = _run(store, trial)
    spans = [_call(run, n) for n in range(calls) if n != skip]
    random.Random(trial).shuffle(spans)
    store.insert_spans(spans)
    return run


async def _page(tmp_path: Path, db_url: str, store: Store, query: str) -> str:
    settings = Settings(db=db_url, sandbox_root=str(tmp_path / "sandboxes"))
    async with AsyncTestClient(asgi_app(settings, store), base_url=IN_PROCESS_URL) as client:
        response = await client.get(f"/compare/runs?{query}")
    assert response.status_code == 200, response.text
    return response.text


def _shown_calls(page: str, run: RunRow) -> list[str]:
    """The span ids of `run`'s calls in the table, in row order."""
    return re.findall(rf'href="/runs/{run.id}#span-([0-9a-f]+)">read</a>', page)


async def test_long_trials_show_the_first_calls_and_say_what_is_beyond(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    long = _long_trial(store, 0, ALIGN_CAP + 30)
    gapped = _long_trial(store, 1, ALIGN_CAP + 30, skip=5)  # a gap inside the cap
    short = _long_trial(store, 2, 12)
    page = await _page(tmp_path, db_url, store, f"experiment={'e' * 16}&task=long")

    rows = re.findall(r'<th scope="row">(\d+)', page)
    assert len(rows) == ALIGN_CAP + 1  # the cap's calls of each, with one gap row
    # the right calls: each trial's first ALIGN_CAP by start time, in order, and none after
    assert _shown_calls(page, long) == [f"{0:04x}{n:012x}" for n in range(ALIGN_CAP)]
    assert _shown_calls(page, gapped) == [
        f"{1:04x}{n:012x}" for n in range(ALIGN_CAP + 1) if n != 5
    ]
    assert _shown_calls(page, short) == [f"{2:04x}{n:012x}" for n in range(12)]
    assert f'span-{0:04x}{ALIGN_CAP:012x}">read' not in page
    assert "The trials first diverge at" in page  # the skipped call, within the cap
    # the counts, per trial, with a link to where each trace goes on
    assert (
        f"first {ALIGN_CAP} of {ALIGN_CAP + 30} calls aligned; 30 more not shown "
        f'(<a href="/runs/{long.id}#span-{0:04x}{ALIGN_CAP:012x}">full trace</a>)'
    ) in page
    assert (
        f"first {ALIGN_CAP} of {ALIGN_CAP + 29} calls aligned; 29 more not shown "
        f'(<a href="/runs/{gapped.id}#span-{1:04x}{ALIGN_CAP + 1:012x}">full trace</a>)'
    ) in page
    assert '<div class="calls small muted">12 calls</div>' in page
    # the note says plainly what the page leaves out
    note = page[page.index('<p class="cap-note"') :].split("</p>")[0]
    assert f"only the first {ALIGN_CAP} calls of each trial are aligned and shown here" in note
    assert f"trial 0</a>: 30 more of {ALIGN_CAP + 30} calls" in note
    assert f"trial 1</a>: 29 more of {ALIGN_CAP + 29} calls" in note
    assert "trial 2" not in note  # a short trial has nothing beyond the cap


async def test_trials_that_agree_to_the_cap_say_so(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    runs = [_long_trial(store, t, ALIGN_CAP + 1 + t) for t in range(2)]
    page = await _page(tmp_path, db_url, store, "&".join(f"run={r.id}" for r in runs))
    assert f"The first {ALIGN_CAP} calls of every trial agree" in page
    assert "The trials first diverge" not in page and 'id="divergence"' not in page
    assert "1 more not shown" in page and "2 more not shown" in page


def _mixed_trial(store: Store, trial: int, rng: random.Random) -> RunRow:
    """Everything a run's trace holds: its root, tool calls (some failing), model turns, turn
    spans, verifier probes, an agent's own OTLP spans that name no run, ties in start time."""
    run = _run(store, trial)
    spans: list[dict[str, Any]] = [
        _span(run, 0xFFFF, {}, name="invoke_agent cfg", start=T0 - 1, span_id=run.root_span_id)
    ]
    size = 60 if trial == 0 else rng.randint(ALIGN_CAP + 50, 2 * ALIGN_CAP)  # spans, not calls
    for n in range(size):
        kind = rng.random()
        start = T0 + rng.randint(0, 40) * 1000  # calls share start times: the tie-break counts
        if kind < 0.6:
            error = {"status": {"code": 2, "message": "boom"}} if rng.random() < 0.1 else {}
            spans.append(_call(run, n, rng.choice(("read", "write")), start=start, **error))
        elif kind < 0.7:
            chat = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_OUTPUT_MESSAGES: "[]"}
            spans.append(_span(run, n, chat, name="chat m", start=start))
        elif kind < 0.8:  # a probe names a tool too, but is no agent call
            spans.append(_call(run, n, "read", start=start))
            spans[-1]["attributes"][sc.ROLE] = sc.ROLE_VERIFIER
        elif kind < 0.9:  # the agent's own tool span, as ingest stores it: not a call
            names_run = rng.random() < 0.5  # joined by its run id, or by trace id only
            own = _call(run, n, "read", start=start, run_id=run.id if names_run else None)
            own["name"] = "execute_tool read"
            own["attributes"] = {
                k: v for k, v in own["attributes"].items() if k not in (sc.RUN_ID, sc.ROLE)
            } | {sc.EVIDENCE: sc.EVIDENCE_AGENT_REPORTED}
            spans.append(own)
        elif kind < 0.94:
            spans.append(_span(run, n, {sc.MCP_METHOD_NAME: "tools/list"}, start=start))
        elif kind < 0.97:  # a plain HTTP tool the proxy recorded: a call, named by its route
            http = {sc.HTTP_REQUEST_METHOD: "POST", sc.URL_PATH: "/refund", sc.REQUEST_BODY: "{}"}
            spans.append(_span(run, n, http, name="POST /refund", start=start))
        else:  # the /llm/ proxy's request that is no chat (GET /models): no call, no turn
            llm = {sc.HTTP_REQUEST_METHOD: "GET", sc.GEN_AI_PROVIDER_NAME: "openai"}
            spans.append(_span(run, n, llm, name="GET /models", start=start))
    for turn in range(3):
        attributes = {sc.RUN_ID: run.id, sc.TURN_INDEX: turn}
        turn_span = _span(run, 0xF000 + turn, {}, name=f"turn {turn}", start=T0 + turn * 13_000)
        turn_span["attributes"] = attributes
        spans.append(turn_span)
    rng.shuffle(spans)
    store.insert_spans(spans)
    return run


def test_the_query_reads_what_reading_every_span_would_show(store: Store) -> None:
    """The SQL test for an agent call and the per-run window agree with the Python ones on
    every kind of span: the same calls in the same order, the same counts, the same page."""
    rng = random.Random(14)
    runs = [_mixed_trial(store, trial, rng) for trial in range(4)]
    every = store.spans_for_runs(runs)
    read = first_agent_calls(store, runs, ALIGN_CAP)
    for run in runs:
        calls = [s for s in every[run.id] if _is_agent_call(s)]
        assert read.totals[run.id] == len(calls)
        got = [s["span_id"] for s in read.spans[run.id] if _is_agent_call(s)]
        assert got == [s["span_id"] for s in calls[:ALIGN_CAP]]
        beyond = calls[ALIGN_CAP:]
        assert read.next_call.get(run.id) == (beyond[0]["span_id"] if beyond else None)
    assert any(total > ALIGN_CAP for total in read.totals.values())
    assert any(total <= ALIGN_CAP for total in read.totals.values())
    # the agent's own tool spans are in the trials but never read as calls
    assert any(s["name"] == "execute_tool read" for r in runs for s in every[r.id])
    assert not any(s["name"] == "execute_tool read" for r in runs for s in read.spans[r.id])
    assert any(s["name"] == "POST /refund" for r in runs for s in read.spans[r.id])
    assert not any(s["name"] == "GET /models" for r in runs for s in read.spans[r.id])

    full = compare_runs(runs, every, {})
    capped = compare_runs(runs, read.spans, {}, read.totals, read.next_call)

    def drawn(view: Any) -> list[Any]:
        return [
            [None if c is None else (c.span_id, c.key, c.turn, c.error, c.shown) for c in r.cells]
            for r in view.rows
        ]

    assert drawn(capped) == drawn(full)
    assert any(c.turn == 2 for r in capped.rows for c in r.cells if c is not None)
    assert (capped.calls_made, capped.calls_beyond, capped.first_hidden) == (
        full.calls_made,
        full.calls_beyond,
        full.first_hidden,
    )
    assert capped.first_divergence == full.first_divergence
