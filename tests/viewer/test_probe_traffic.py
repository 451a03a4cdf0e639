"""A probe's own MCP traffic on the trace page. A tool probe goes through the proxy like any
client, so its client's handshake and requests are recorded too (verifier spans with no probe
id, children of the run's root: `server/discover`, `tools/call <tool>`, `tools/list`). They are
not checks: "Checks tracecard ran" lists and counts the probes only, and the waterfall nests the
traffic under the probe it belongs to, labelled as check traffic."""

from __future__ import annotations

import html
import re
from pathlib import Path

from tests.viewer.data import _span, probe_span, tool_span
from tests.viewer.one_run import one_run, text_of, transcript_of
from tracecard.traces import semconv as sc


async def test_a_probes_own_traffic_is_neither_listed_nor_counted_as_a_check(
    tmp_path: Path,
) -> None:
    made = one_run(tmp_path, "new-ticket", "hasty", ms=1000)
    run, at = made.run, made.at
    call = tool_span(run, ("create_ticket", {"priority": "high"}, {"id": "T-1"}, None, 20),
                     at + 10**8, run.root_span_id)
    probe = probe_span(run, "search_tickets", {"count": 1}, at + 5 * 10**8)  # 50 ms
    wire = [  # its client's traffic, as the proxy records it: under the root, inside its time
        _span(run, name, at + 5 * 10**8 + ms * 10**6, 5, run.root_span_id,
              attributes={sc.ROLE: sc.ROLE_VERIFIER, sc.MCP_METHOD_NAME: name.split()[0],
                          sc.UPSTREAM: "tools"})
        for ms, name in ((5, "server/discover"), (15, "tools/call search_tickets"),
                         (30, "tools/list"))
    ]
    page = await made.page(call, probe, *wire)
    transcript = transcript_of(page)
    told = text_of(transcript)
    assert "1 tool call, 1 check by tracecard" in told  # was "4 checks"
    checks = text_of(transcript[transcript.index('id="checks-h"') :])
    assert "check tickets" in checks  # the probe, by its id
    assert "server/discover" not in checks and "tools/list" not in checks
    assert checks.count("tracecard read") == 1
    # the waterfall: the probe, then its traffic one level deeper, each marked as such
    rows = re.findall(
        r'<li class="span k-\w+" id="span-(\w+)">.*?<span class="label (d\d+)">'
        r'<span class="name"[^>]*>(.*?)</span><span class="tags">(.*?)</span>',
        page,
        re.S,
    )
    order = [r[0] for r in rows]
    at_probe = order.index(probe["span_id"])
    assert order[at_probe + 1 : at_probe + 4] == [s["span_id"] for s in wire]
    depth = {r[0]: int(r[1][1:]) for r in rows}
    assert all(depth[s["span_id"]] == depth[probe["span_id"]] + 1 for s in wire)
    shown = {r[0]: (html.unescape(r[2]), r[3]) for r in rows}
    assert shown[probe["span_id"]][0] == "check: search_tickets"
    for span in wire:
        label, chips = shown[span["span_id"]]
        assert label == span["name"] and chips.endswith(">check traffic"), (label, chips)


async def test_a_version_probe_is_marked_as_one_not_as_an_error(tmp_path: Path) -> None:
    """The official client's `server/discover` refused by an older server (recorded with
    `tracecard.probe = version`, no error type) says "version probe" on its row."""
    made = one_run(tmp_path, "adhoc", "adhoc", ms=1000)
    run, at = made.run, made.at
    attributes = {sc.ROLE: sc.ROLE_AGENT, sc.MCP_METHOD_NAME: "server/discover",
                  sc.RPC_RESPONSE_STATUS_CODE: "-32601", sc.PROBE: sc.PROBE_VERSION}
    probe = _span(run, "server/discover", at + 10**6, 5, run.root_span_id, attributes=attributes)
    initialize = _span(run, "initialize", at + 10**7, 5, run.root_span_id,
                       attributes={sc.ROLE: sc.ROLE_AGENT, sc.MCP_METHOD_NAME: "initialize"})
    page = await made.page(probe, initialize)
    rows = dict(
        re.findall(r'<li class="span k-\w+" id="span-(\w+)">(.*?)</summary>', page, re.S)
    )
    assert ">version probe</span>" in rows[probe["span_id"]]
    assert "chip fail" not in rows[probe["span_id"]] and "k-error" not in page
    assert "version probe" not in rows[initialize["span_id"]]
