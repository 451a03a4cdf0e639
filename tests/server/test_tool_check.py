"""A suite is checked against the servers it names: an unknown tool is an error before any agent
starts (experiment creation, `tracecard run`, `suite check --config`), with a did-you-mean."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.in_process import in_process_tracecard
from tests.support.processes import ROOT, free_port, mcp_tool_server
from tests.support.proxy import settings_for
from tracecard.scorers import parse_suite
from tracecard.scorers.tool_check import check_tools
from tracecard.server.cli.main import main

TOOL_SERVER = [sys.executable, str(ROOT / "tests" / "servers" / "tool_server.py"), "stdio"]
TOOLS = ["add", "delete_all_notes", "echo", "read_note", "write_note"]

SUITE = """
schema_version = 1
name = "typos-{where}"

[[tasks]]
id = "t"
instruction = "save a note"
upstreams = ["{upstream}"]
tools = ["write_note", "{tools}"]

[[tasks.invocation.calls]]
tool = "{call}"

[[tasks.safety.rules]]
id = "r"
severity = "major"
tool = "{rule}"

[[tasks.safety.rules]]
id = "glob-is-not-checked"
severity = "minor"
tool = "delete_*"

[[tasks.outcome.probes]]
id = "p"
upstream = "{upstream}"
tool = "{probe}"

[[tasks.outcome.predicates]]
probe = "p"
op = "exists"
"""


def suite_text(where: str = "", upstream: str = "notes", **typo: str) -> str:
    names = {"tools": "read_note", "call": "write_note", "rule": "echo", "probe": "read_note"}
    return SUITE.format(where=where or "none", upstream=upstream, **(names | typo))


@pytest.mark.parametrize(
    ("field", "typo", "where"),
    [
        ("probe", "raed_note", "outcome.probes[0].tool"),
        ("call", "write_note_x", "invocation.calls[0].tool"),
        ("tools", "wirte_note", "tools[1]"),
        ("rule", "ecoh", "safety.rules[0].tool"),
    ],
)
def test_each_kind_of_tool_reference_is_checked(field: str, typo: str, where: str) -> None:
    suite = parse_suite(suite_text(**{field: typo}), "toml")
    findings = check_tools(suite, {"notes": TOOLS}, "suite.toml")
    assert [f.level for f in findings] == ["error"]
    message = findings[0].message
    assert message.startswith(f"suite.toml: task 't': {where}: unknown tool {typo!r} on 'notes'")
    assert "did you mean" in message and ", ".join(TOOLS) in message


def test_a_correct_suite_and_an_unreachable_server() -> None:
    suite = parse_suite(suite_text(), "toml")
    assert check_tools(suite, {"notes": TOOLS}) == []
    findings = check_tools(suite, {}, unreachable={"notes": "ConnectError: refused"})
    assert [f.level for f in findings] == ["warning"]
    assert "could not be asked" in findings[0].message and "refused" in findings[0].message


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """In process: the check is tracecard asking its upstreams (real ones) for their tools."""
    folder = tmp_path_factory.mktemp("toolcheck")
    with mcp_tool_server() as url:
        upstreams = {"notes": {"url": url}, "stdio_notes": {"command": TOOL_SERVER}}
        with in_process_tracecard(settings_for(upstreams, folder)) as tracecard:
            yield tracecard.client


@pytest.mark.parametrize("upstream", ["notes", "stdio_notes"])
def test_experiment_creation_refuses_an_unknown_tool_and_creates_nothing(
    tracecard: httpx.Client, upstream: str
) -> None:
    toml = {"content-type": "application/toml"}
    text = suite_text(f"api-{upstream}", upstream, probe="raed_note")
    assert tracecard.post("/api/suites", content=text, headers=toml).status_code == 201
    before = tracecard.get("/api/experiments").json()["experiments"]
    body = {"suite": f"typos-api-{upstream}", "config": {"name": "x"}, "trials": 2}
    refused = tracecard.post("/api/experiments", json=body)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "outcome.probes[0].tool: unknown tool 'raed_note'" in detail
    assert "did you mean 'read_note'" in detail
    assert tracecard.get("/api/experiments").json()["experiments"] == before
    good = suite_text(f"ok-{upstream}", upstream)
    assert tracecard.post("/api/suites", content=good, headers=toml).status_code == 201
    created = tracecard.post("/api/experiments", json=body | {"suite": f"typos-ok-{upstream}"})
    assert created.status_code == 201 and created.json()["warnings"] == []


def test_suite_check_with_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tracecard.toml"
    command = ", ".join(f'"{part}"' for part in TOOL_SERVER)
    config.write_text(
        f'db = "sqlite:///{tmp_path}/t.db"\n[upstreams.notes]\ncommand = [{command}]\n'
        f'[upstreams.gone]\nurl = "http://127.0.0.1:{free_port()}/mcp"\n'
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(suite_text(call="wrte_note"))
    assert main(["suite", "check", str(bad)]) == 0  # without --config: the format only
    capsys.readouterr()
    assert main(["suite", "check", str(bad), "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert "invocation.calls[0].tool: unknown tool 'wrte_note'" in err
    assert "did you mean 'write_note'" in err
    unreachable = tmp_path / "gone.toml"
    unreachable.write_text(suite_text(upstream="gone"))
    assert main(["suite", "check", str(unreachable), "--config", str(config)]) == 0
    out = capsys.readouterr()
    assert "warning:" in out.err and "'gone' could not be asked" in out.err and "ok" in out.out


FILE_PROBE = """
schema_version = 1
name = "files"

[[tasks]]
id = "saved"
instruction = "save a note"
upstreams = ["{upstream}"]

[[tasks.outcome.probes]]
id = "f"
kind = "file"
path = "notes.json"

[[tasks.outcome.predicates]]
probe = "f"
op = "exists"
"""


def test_a_file_probe_needs_an_upstream_that_gives_runs_a_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every run of such a task would be "not evaluated" (no sandbox to read): an error first."""
    command = ", ".join(f'"{part}"' for part in TOOL_SERVER)
    (tmp_path / "fixture").mkdir()
    config = tmp_path / "tracecard.toml"
    config.write_text(
        f'db = "sqlite:///{tmp_path}/t.db"\n'
        f"[upstreams.shared]\ncommand = [{command}]\n"
        f'[upstreams.own]\ncommand = [{command}]\nper_run = true\nfixture = "fixture"\n'
    )
    for upstream, code in (("shared", 1), ("own", 0)):
        suite = tmp_path / f"{upstream}.toml"
        suite.write_text(FILE_PROBE.format(upstream=upstream))
        assert main(["suite", "check", str(suite), "--config", str(config)]) == code, upstream
        err = capsys.readouterr().err
        reported = "file probe 'f' reads the run's sandbox, but none of its upstreams (shared)"
        assert (reported in err) == (upstream == "shared"), err


def test_experiment_creation_refuses_a_file_probe_without_a_sandbox(
    tracecard: httpx.Client,
) -> None:
    toml = {"content-type": "application/toml"}
    text = FILE_PROBE.format(upstream="stdio_notes").replace('"files"', '"files-api"')
    assert tracecard.post("/api/suites", content=text, headers=toml).status_code == 201
    body = {"suite": "files-api", "config": {"name": "x"}, "trials": 1}
    refused = tracecard.post("/api/experiments", json=body)
    assert refused.status_code == 422, refused.text
    assert "file probe 'f' reads the run's sandbox" in refused.json()["detail"]
