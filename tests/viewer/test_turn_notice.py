"""Turn notices (server/evaluation/turn_notice.py) on the trace page: tracecard telling an upstream
that a turn began is labelled a turn notice, where the turn began, never listed as a check of the
outcome nor drawn as one in the waterfall."""

from __future__ import annotations

import re
from pathlib import Path

from tests.viewer.data import _span, probe_span, tool_span
from tests.viewer.one_run import one_run, text_of, transcript_of
from tracecard.server.evaluation.turn_notice import TURN_NOTICE_SPAN
from tracecard.traces import semconv as sc


async def test_a_turn_notice_is_labelled_as_one_not_as_a_check(tmp_path: Path) -> None:
    assert TURN_NOTICE_SPAN == sc.TURN_NOTICE_SPAN  # the recorder and the viewer agree
    made = one_run(tmp_path, "miss-func", "bfcl")
    run, at = made.run, made.at
    # turn 0's call and its check (the probe after it), then turn 1 with its notice
    call = tool_span(run, ("cd", {"folder": "docs"}, {"ok": True}, None, 20), at + 10**8,
                     run.root_span_id)
    check = probe_span(run, "get_state", {"cwd": "/docs"}, at + 2 * 10**8)
    turn = _span(run, "turn 1", at + 10**9, 300, run.root_span_id, kind=sc.KIND_INTERNAL,
                 attributes={sc.TURN_INDEX: 1, sc.TURN_USER: "Now sort the files."})
    notice = _span(run, TURN_NOTICE_SPAN, at + 10**9 + 10**6, 5, turn["span_id"],
                   kind=sc.KIND_INTERNAL,
                   attributes={sc.ROLE: sc.ROLE_VERIFIER, sc.TURN_INDEX: 1, sc.UPSTREAM: "bfcl",
                               sc.GEN_AI_TOOL_NAME: "_bfcl_turn"})
    sort = tool_span(run, ("sort", {"file": "a"}, {"ok": True}, None, 20), at + 10**9 + 10**8,
                     turn["span_id"])
    page = await made.page(call, check, turn, notice, sort)
    transcript = transcript_of(page)
    checks_at = transcript.index('id="checks-h"')
    told = text_of(transcript[:checks_at])
    # in the transcript, after the turn's user message, in words
    assert "Now sort the files." in told and "turn notice: turn 1 begins" in told
    assert told.index("Now sort the files.") < told.index("turn notice: turn 1 begins")
    assert "tracecard told bfcl with _bfcl_turn" in told
    # the checks are the outcome probes only: the notice is neither listed nor counted there
    checks = text_of(transcript[checks_at:])
    assert "check state" in checks and "_bfcl_turn" not in checks and "notice" not in checks
    assert "2 tool calls, 1 check by tracecard" in told
    # the waterfall row says turn notice, in its label and its chip, and is drawn as one
    row = re.search(rf'<li class="span k-(\w+)" id="span-{notice["span_id"]}">.*?</summary>', page,
                    re.S)
    assert row is not None and row.group(1) == "notice"
    assert "turn notice: _bfcl_turn" in row.group(0) and ">turn notice</span>" in row.group(0)
    assert "chip check" not in row.group(0) and "check:" not in row.group(0)
    # it opens its turn: first under the turn span, not moved after the agent's calls as checks are
    rows = re.findall(r'<li class="span k-\w+" id="span-(\w+)">', page)
    assert rows.index(turn["span_id"]) + 1 == rows.index(notice["span_id"])
    assert rows.index(notice["span_id"]) + 1 == rows.index(sort["span_id"])
    assert rows.index(check["span_id"]) > rows.index(call["span_id"])
