"""bench/real_model.py: its checker of what the trace recorded wrong, and (only where a real
model server is configured: TRACECARD_REAL_MODEL_URL, e.g. llama-server's
http://127.0.0.1:8093/v1) one helpdesk task through tracecard with that model, nothing recorded
wrong. CI has no model server: the second test is skipped there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.real_model import recorded_wrong
from tests.scorers.test_model import ADD, agent_loop
from tracecard.traces import semconv as sc

ROOT = Path(__file__).resolve().parents[2]


def test_the_checker_finds_a_missing_link_and_a_token_count_that_differs() -> None:
    spans = agent_loop()
    seen = {"output": "It is 42.", "requests": 2, "tool_calls": 1}
    seen |= {"input_tokens": 20, "output_tokens": 10}
    [missing] = recorded_wrong(spans, seen)
    assert missing.startswith("links: add (" + spans[2]["span_id"][:6] + ") id None -> []")
    spans[2]["attributes"][sc.GEN_AI_TOOL_CALL_ID] = ADD["id"]
    spans[2]["links"] = [{"trace_id": spans[1]["trace_id"], "span_id": spans[1]["span_id"]}]
    assert recorded_wrong(spans, seen) == []
    assert recorded_wrong(spans, {**seen, "input_tokens": 21}) == [
        "input_tokens: recorded 20, agent saw 21"
    ]
    # a tool call that failed is not in pydantic-ai's count (it retries instead): not compared
    spans[2]["attributes"][sc.ERROR_TYPE] = sc.ERR_TOOL
    assert recorded_wrong(spans, {**seen, "tool_calls": 0}) == []
    assert recorded_wrong(spans, seen) == ["tool_calls: recorded 0, agent saw 1"]


@pytest.mark.skipif(
    not os.environ.get("TRACECARD_REAL_MODEL_URL"), reason="no model server configured"
)
def test_a_real_model_run_is_recorded_as_the_agent_saw_it(tmp_path: Path) -> None:
    out = tmp_path / "real.json"
    command = [sys.executable, str(ROOT / "bench" / "real_model.py"), "--json", str(out)]
    command += ["--tasks", "count-urgent", "--wires", "openai", "--modes", "stream"]
    subprocess.run(command, check=True, timeout=900, cwd=ROOT)
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 1 and runs[0]["recorded_wrong"] == []
