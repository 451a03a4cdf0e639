"""`tracecard audit` end to end: a suite with one planted defect of each kind, served by a real
MCP server (tests/servers/audit_tools.py, per-run processes and sandboxes), audited by the
built-in baselines through an embedded tracecard. Each planted task is flagged with exactly its
defect and the reason; the clean task, and a suite of clean tasks, get no flag."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

from tracecard.server.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "servers" / "audit_tools.py"

CLEAN = """
[[tasks]]
id = "clean"
instruction = "Set a to 5."
upstreams = ["tools"]
[tasks.invocation]
calls = [{ tool = "set_value", arguments = { key = "a", value = 5 } }]
[tasks.outcome]
probes = [{ id = "a", upstream = "tools", tool = "get_value", arguments = { key = "a" } }]
predicates = [{ probe = "a", path = "$.structuredContent.value", op = "eq", value = 5 }]
"""

PLANTED = """
# the start state already passes: `exists` holds for the initial 0
[[tasks]]
id = "already-passes"
instruction = "Set b to 7."
upstreams = ["tools"]
[tasks.invocation]
calls = [{ tool = "set_value", arguments = { key = "b", value = 7 } }]
[tasks.outcome]
probes = [{ id = "b", upstream = "tools", tool = "get_value", arguments = { key = "b" } }]
predicates = [{ probe = "b", path = "$.structuredContent.value", op = "exists" }]

# the gold call is one the tool rejects (negative values are refused)
[[tasks]]
id = "gold-rejected"
instruction = "Set c to -1."
upstreams = ["tools"]
[tasks.invocation]
calls = [{ tool = "set_value", arguments = { key = "c", value = -1 } }]
[tasks.outcome]
probes = [{ id = "c", upstream = "tools", tool = "get_value", arguments = { key = "c" } }]
predicates = [{ probe = "c", path = "$.structuredContent.value", op = "eq", value = -1 }]

# a second probe reads a key the tool never writes
[[tasks]]
id = "blind-probe"
instruction = "Set d to 3."
upstreams = ["tools"]
[tasks.invocation]
calls = [{ tool = "set_value", arguments = { key = "d", value = 3 } }]
[tasks.outcome]
probes = [
  { id = "d", upstream = "tools", tool = "get_value", arguments = { key = "d" } },
  { id = "d-log", upstream = "tools", tool = "get_value", arguments = { key = "d-log" } },
]
predicates = [
  { probe = "d", path = "$.structuredContent.value", op = "eq", value = 3 },
  { probe = "d-log", path = "$.structuredContent.key", op = "eq", value = "d-log" },
]

# any call of get_value meets the expectation
[[tasks]]
id = "weak-expectation"
instruction = "Look up any value."
upstreams = ["tools"]
tools = ["get_value"]
[tasks.invocation]
calls = [{ tool = "get_value", arguments = { key = { any = true } } }]

# the gold call's key is written nowhere the agent can read it (and no other call is allowed)
[[tasks]]
id = "gold-unseen"
instruction = "Set the counter to 4."
upstreams = ["tools"]
[tasks.invocation]
allow_extra = false
calls = [{ tool = "set_value", arguments = { key = "hidden-17", value = 4 } }]
[tasks.outcome]
probes = [{ id = "h", upstream = "tools", tool = "get_value", arguments = { key = "hidden-17" } }]
predicates = [{ probe = "h", path = "$.structuredContent.value", op = "eq", value = 4 }]

# the environment drops every second write
[[tasks]]
id = "nondeterministic"
instruction = "Set e to 2."
upstreams = ["tools"]
[tasks.invocation]
calls = [{ tool = "flaky_set", arguments = { key = "e", value = 2 } }]
[tasks.outcome]
probes = [{ id = "e", upstream = "tools", tool = "get_value", arguments = { key = "e" } }]
predicates = [{ probe = "e", path = "$.structuredContent.value", op = "eq", value = 2 }]
"""

EXPECTED = {
    "clean": [],
    "already-passes": ["passable_by_nothing"],
    "gold-rejected": ["oracle_fails"],
    "gold-unseen": ["unseen_gold"],
    "blind-probe": ["blind_probe"],
    "weak-expectation": ["weak_invocation"],
    "nondeterministic": ["unstable"],
}


def _write(tmp_path: Path, name: str, tasks: str) -> Path:
    suite = tmp_path / f"{name}.toml"
    suite.write_text(f'schema_version = 2\nname = "{name}"\n{tasks}', encoding="utf-8")
    return suite


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("audit")
    folder = tempfile.mkdtemp(prefix="audit-tools-")  # short: socket paths are limited
    sock = str(Path(folder) / "tools.sock")
    # one preloaded server forks each run's (the per-run process relays its stdio to it): the
    # same tools, a process and a sandbox per run, without importing the MCP SDK per run
    counter = tmp / "flaky-calls"
    preloader = subprocess.Popen(
        [sys.executable, str(SERVER), "--preload", sock],
        env={**os.environ, "AUDIT_TOOLS_COUNTER": str(counter)},  # the forked servers' env
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert preloader.stdout is not None and preloader.stdout.readline().strip() == b"ready"
    command = json.dumps([sys.executable, str(SERVER), "{sandbox}"])
    (tmp / "tracecard.toml").write_text(
        f'sandbox_root = "{tmp / "sandboxes"}"\n'
        "[upstreams.tools]\n"
        f"command = {command}\n"
        "per_run = true\n"
        f'env = {{ AUDIT_TOOLS_COUNTER = "{counter}", AUDIT_TOOLS_PRELOADED = "{sock}" }}\n',
        encoding="utf-8",
    )
    try:
        yield tmp
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(preloader.pid, signal.SIGKILL)
        preloader.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _audit(workspace: Path, suite: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    argv = ["audit", str(suite), "--config", str(workspace / "tracecard.toml")]
    argv += ["--db", str(workspace / "t.db"), "--port", "0", "--quiet"]
    argv += ["--work-dir", str(workspace / "work"), "--json", *extra]
    code = main(argv)
    out = capsys.readouterr().out
    document = json.loads(out)
    document["exit_code"] = code
    return document


def test_audit_flags_each_planted_defect_with_its_reason(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _write(workspace, "planted", CLEAN + PLANTED)
    markdown = workspace / "audit.md"
    document = _audit(
        workspace,
        suite,
        capsys,
        "--trials",
        "2",
        "--fail-on",
        "defects",
        "--markdown",
        str(markdown),
    )
    found = {t["task_id"]: [f["kind"] for f in t["findings"]] for t in document["tasks"]}
    assert found == EXPECTED
    reasons = {t["task_id"]: t["findings"][0]["reason"] for t in document["tasks"] if t["findings"]}
    assert reasons["already-passes"].startswith("null passed outcome in 2/2 trial(s)")
    assert "start state" in reasons["already-passes"]
    assert reasons["gold-rejected"].startswith("oracle failed outcome in 2/2 trial(s)")
    assert "eq -1: observed 0" in reasons["gold-rejected"]
    assert reasons["gold-unseen"].startswith("the oracle's set_value(key='hidden-17') uses text")
    assert reasons["blind-probe"].startswith("probe d-log observed the same value")
    assert "random-tool passed invocation" in reasons["weak-expectation"]
    assert "disagree on outcome (1/2 passed)" in reasons["nondeterministic"]
    # every finding links to traces of the runs that show it
    for task in document["tasks"]:
        for finding in task["findings"]:
            assert finding["runs"] and all("/runs/" in r["url"] for r in finding["runs"])
    assert document["counts"] == {
        "passable_by_nothing": 1,
        "oracle_fails": 1,
        "unseen_gold": 1,
        "blind_probe": 1,
        "weak_invocation": 1,
        "unstable": 1,
    }
    assert document["flagged_tasks"] == 6 and document["total_tasks"] == 7
    assert document["exit_code"] == 1  # --fail-on defects
    text = markdown.read_text(encoding="utf-8")
    assert "| `gold-rejected` | not passable by the oracle |" in text
    assert "6 of 7 tasks flagged" in text
    _the_viewer_shows_the_same_findings(workspace, document)


def _the_viewer_shows_the_same_findings(workspace: Path, document: dict) -> None:
    """The suite health page and each task's trace page read the baselines' findings back from
    the database (not from the CLI's document) and show each with its reason and its traces."""
    from litestar.testing import TestClient

    from tracecard.server.app import create_app
    from tracecard.server.settings import Settings
    from tracecard.traces import queries
    from tracecard.traces.store import Store

    db = f"sqlite:///{workspace / 't.db'}"
    store = Store(db)
    settings = Settings(db=db, sandbox_root=str(workspace / "viewer-sandboxes"))
    with TestClient(create_app(settings, store), base_url="http://127.0.0.1:7800") as client:
        page = client.get(f"/suites/{document['suite']['version']}/health")
        assert page.status_code == 200
        html = unescape(page.text)
        assert "6 of 7 tasks flagged by" in html
        for task in document["tasks"]:
            assert (f'id="audit-{task["task_id"]}"' in html) == bool(task["findings"])
            for finding in task["findings"]:
                assert finding["reason"] in html
                assert all(f'href="/runs/{r["id"]}"' in html for r in finding["runs"][:4])
        gold = next(t for t in document["tasks"] if t["task_id"] == "gold-rejected")
        finding = gold["findings"][0]
        trace = unescape(client.get(f"/runs/{finding['runs'][0]['id']}").text)
        assert "Audit of this task" in trace and "not passable by the oracle" in trace
        assert finding["reason"] in trace and "#audit-gold-rejected" in trace
        clean = queries.experiment_runs(store, document["experiments"]["null"]["id"], "clean")
        trace = unescape(client.get(f"/runs/{clean[0].id}").text)
        assert "found nothing wrong with this task" in trace
    store.dispose()


def test_a_clean_suite_gets_no_flag(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    second = CLEAN.replace('"clean"', '"clean-2"').replace('"a"', '"z"').replace("a to", "z to")
    suite = _write(workspace, "clean", CLEAN + second)
    document = _audit(workspace, suite, capsys, "--trials", "1", "--fail-on", "defects")
    assert [t["findings"] for t in document["tasks"]] == [[], []]
    assert document["checks"]["unstable"] == "needs the oracle baseline with --trials 2 or more"
    assert document["exit_code"] == 0
