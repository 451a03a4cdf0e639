"""#14.15: the trials comparison of long trials is bounded, and the page says what it left out."""

from __future__ import annotations

import json
import re
from pathlib import Path

from litestar.testing import TestClient

from tracecard.server.app import create_app
from tracecard.server.settings import Settings
from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store
from tracecard.viewer.align import ALIGN_CAP


def _trial(store: Store, trial: int, calls: int, skip: int | None = None) -> None:
    run_id = f"{trial:016x}"
    store.add_run(
        RunRow(id=run_id, experiment_id="e" * 16, task_id="long", trial=trial,
               trace_id=f"{trial:032x}", root_span_id=run_id, status="finished")
    )  # fmt: skip
    spans = []
    for n in range(calls):
        if n == skip:
            continue
        spans.append(
            {
                "trace_id": f"{trial:032x}",
                "span_id": f"{trial:04x}{n:012x}",
                "parent_span_id": run_id,
                "name": "tools/call read",
                "kind": 3,
                "start_time_unix_nano": 10**18 + n * 1000,
                "end_time_unix_nano": 10**18 + n * 1000 + 10,
                "status": {"code": 0},
                "attributes": {
                    sc.RUN_ID: run_id,
                    sc.ROLE: sc.ROLE_AGENT,
                    sc.GEN_AI_TOOL_NAME: "read",
                    sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"n": n}),
                },
                "run_id": run_id,
            }
        )
    store.insert_spans(spans)


def test_long_trials_show_the_aligned_calls_and_say_what_is_beyond(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    store = Store(url)
    store.create_schema()
    _trial(store, 0, ALIGN_CAP + 30)
    _trial(store, 1, ALIGN_CAP + 30, skip=5)  # a skipped call opens a gap inside the cap
    with TestClient(create_app(Settings(db=url, sandbox_root=str(tmp_path)), store)) as client:
        page = client.get(f"/compare/runs?experiment={'e' * 16}&task=long").text
    rows = re.findall(r'<th scope="row">(\d+)', page)
    assert len(rows) == ALIGN_CAP + 1  # the cap's calls of each, with one gap row
    assert f"the first {ALIGN_CAP} calls of each trial are aligned and shown here" in page
    assert "trial 0</a>: 30 more" in page and "trial 1</a>: 29 more" in page
    assert "The trials first diverge at" in page  # the skipped call, within the cap
    store.dispose()
