"""The first hour of a new user (#14): each numbered item as a test of the command's output."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

# Imported at collection, as in test_tool_check.py: the MCP stdio client binds sys.stderr as its
# servers' stderr when first imported, which must be a real file, not capsys's buffer.
from tests.server.test_tool_check import TOOL_SERVER, suite_text
from tests.support.processes import ROOT
from tracecard import __version__
from tracecard.server.cli.common import configure_logging
from tracecard.server.cli.main import main

TRACECARD = [str(Path(sys.executable).parent / "tracecard")]  # the installed console script


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACECARD_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_1_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"tracecard {__version__}"


def test_2_run_old_spellings_warn_and_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    from tracecard.server.cli.main import build_parser
    from tracecard.server.cli.run import resolve_renamed_flags

    parser = build_parser()
    base = ["run", "--suite", "s.toml", "--agent", "true"]
    old = parser.parse_args([*base, "--settings", "x/tracecard.toml", "--config", "careful"])
    resolve_renamed_flags(old)
    assert (old.name, old.config) == ("careful", "x/tracecard.toml")
    err = capsys.readouterr().err
    assert "--settings is deprecated: use --config PATH" in err
    assert "--config careful as the name is deprecated: use --name careful" in err
    new = parser.parse_args([*base, "--config", "x/tracecard.toml", "--name", "careful"])
    resolve_renamed_flags(new)
    assert (new.name, new.config) == ("careful", "x/tracecard.toml")
    assert capsys.readouterr().err == ""
    # every command that reads tracecard.toml calls it --config
    commands = _commands(parser)
    for command in ("serve", "run", "suite check", "score", "compare", "export", "gate"):
        assert "--config" in commands[command], command
        assert "tracecard.toml" in commands[command]["--config"], command


def _commands(parser: argparse.ArgumentParser) -> dict[str, dict[str, str]]:
    """Each (sub)command's options: option string -> help (SUPPRESS for hidden ones)."""
    found: dict[str, dict[str, str]] = {}

    def walk(node: argparse.ArgumentParser, name: str) -> None:
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child_name, child in action.choices.items():
                    walk(child, f"{name} {child_name}".strip())
            elif name:
                for option in action.option_strings:
                    found.setdefault(name, {})[option] = str(action.help)

    walk(parser, "")
    return found


# A flag that two commands share means one thing: its help names that thing in each command.
MEANINGS = {
    "--config": "tracecard.toml",
    "--db": "database",
    "--port": "port",
    "--server": "tracecard",
    "--token": "API token",
    "--json": "JSON",
    "--quiet": "progress bar",
    "--trials": "trials per task",
    "--concurrency": "runs at a time",
    "--timeout": "seconds per run",
    "--experiment": "experiment id",
    "--output": "file",
    "-o": "file",
    "--log-level": "log level",
    "--debug": "traceback",
    "--fail-on": "exit 1 when",
    "--work-dir": "answers and output tails",
    "--agent": "command",
    "--tags": "tag",
    "--lost-after": "silent this long",
    "--component": "component",
    "--format": "output format",
    "--base-url": "the viewer's address",
    "--min": "minimum of a statistic",
    "--per-task": "every task",
    "--max-flag": "most runs with a flag",
    "--max-flags": "most flags",
    "--required": "must pass",
    "--baseline": "to compare to",
    "--no-regress": "paired comparison",
    "--strict": "undecided",
    "--allow-not-evaluated": "not evaluated",
}
# Old spellings, hidden from --help, accepted with a one-line deprecation warning.
DEPRECATED = {("run", "--settings"), ("suite check", "--settings"), ("import bfcl", "--name")}


def test_2_one_meaning_per_flag_across_commands() -> None:
    from tracecard.server.cli.main import build_parser

    commands = _commands(build_parser())
    hidden = {
        (command, option)
        for command, options in commands.items()
        for option, text in options.items()
        if text == argparse.SUPPRESS
    }
    assert hidden == DEPRECATED
    shared: dict[str, list[str]] = {}
    for command, options in commands.items():
        for option in options:
            if (command, option) not in hidden and option not in ("-h", "--help"):
                shared.setdefault(option, []).append(command)
    shared = {option: names for option, names in shared.items() if len(names) > 1}
    assert set(shared) <= set(MEANINGS), sorted(set(shared) - set(MEANINGS))
    for option, names in shared.items():
        for command in names:
            assert MEANINGS[option] in commands[command][option], (option, command)
    # --name is the configuration's name: the command that names a suite says --suite-name
    assert shared.get("--name") is None and "configuration" in commands["run"]["--name"]
    assert "suite" in commands["import bfcl"]["--suite-name"]


def test_2_suite_check_takes_config_and_its_old_spelling_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ", ".join(f'"{part}"' for part in TOOL_SERVER)
    config = tmp_path / "tracecard.toml"
    config.write_text(
        f'db = "sqlite:///{tmp_path}/t.db"\n[upstreams.notes]\ncommand = [{command}]\n'
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(suite_text(call="wrte_note"))
    monkeypatch.chdir(tmp_path)
    for flags, warned in (
        (["--config"], False),  # alone: ./tracecard.toml (`--config PATH`: test_tool_check.py)
        (["--settings", str(config)], True),
    ):
        assert main(["suite", "check", str(bad), *flags]) == 1, flags
        err = capsys.readouterr().err
        assert "invocation.calls[0].tool: unknown tool 'wrte_note'" in err, flags
        deprecation = [line for line in err.splitlines() if "deprecated" in line]
        assert deprecation == (
            ["tracecard: warning: --settings is deprecated: use --config PATH (the same flag "
             "as in every command)"] if warned else []
        ), flags  # fmt: skip


def test_2_import_bfcl_names_the_suite_with_suite_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["import", "bfcl", "--category", "simple_python", "--limit", "1"]
    assert main([*base, "--suite-name", "mine", "-o", str(tmp_path / "new.toml")]) == 0
    assert 'name = "mine"' in (tmp_path / "new.toml").read_text()
    assert "deprecated" not in capsys.readouterr().err
    assert main([*base, "--name", "old", "-o", str(tmp_path / "old.toml")]) == 0
    assert 'name = "old"' in (tmp_path / "old.toml").read_text()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--name is deprecated here: use --suite-name NAME" in err


def test_3_4_8_serve_finds_tracecard_toml_and_prints_the_bound_port(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "tracecard.toml").write_text(
        '[upstreams.tools]\nurl = "http://127.0.0.1:9/mcp"\n'
        '[upstreams.weather]\nurl = "http://127.0.0.1:9"\nkind = "http"\n'
        '[upstreams.model]\nurl = "http://127.0.0.1:9/v1"\nkind = "openai"\n'
        '[upstreams.files]\ncommand = ["true"]\nper_run = true\nfixture = "fixtures/files"\n'
    )
    process = subprocess.Popen(
        [*TRACECARD, "serve", "--port", "0", "--db", str(tmp_path / "t.db")],
        cwd=tmp_path / "sub",  # found in the parent folder
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        otlp = process.stdout.readline()
        upstream = process.stdout.readline()
        assert banner.startswith("tracecard serving on http://127.0.0.1:")
        port = int(banner.split("http://127.0.0.1:")[1].split()[0])
        assert port != 0
        assert upstream.strip() == f"upstream tools: http://127.0.0.1:{port}/mcp/tools"
        # each kind where agents reach it (an HTTP tool, a model API), and a missing fixture
        others = [process.stdout.readline().strip() for _ in range(3)]
        assert others == [
            f"upstream weather: http://127.0.0.1:{port}/http/weather/",
            f"upstream model: http://127.0.0.1:{port}/llm/model  (the model SDK's base URL)",
            f"upstream files: http://127.0.0.1:{port}/mcp/files  (warning: fixture "
            f"{(tmp_path / 'fixtures' / 'files').resolve()} is not a folder)",
        ]
        assert otlp.strip() == f"OTLP/HTTP traces endpoint: http://127.0.0.1:{port}/v1/traces"
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not answer on its port"
                time.sleep(0.1)
        assert health.status_code == 200
        run = httpx.post(f"http://127.0.0.1:{port}/api/runs", json={}).json()
        assert all(f"127.0.0.1:{port}/" in url for url in run["urls"].values())
        assert run["urls"], run
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=15)
    assert f"config: {(tmp_path / 'tracecard.toml').resolve()}" in err
    assert "INFO" not in err  # item 8: no alembic lines at start


def test_8_chatty_libraries_are_quiet_by_default() -> None:
    configure_logging("warning")
    for name in ("alembic.runtime.plugins", "httpx", "httpcore.connection"):
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
    configure_logging("debug")
    assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)
    configure_logging("warning")


def test_9_off_loopback_refusal_is_one_plain_line(tmp_path: Path) -> None:
    env = {**_clean_env(), "TRACECARD_HOST": "0.0.0.0"}
    result = subprocess.run(
        [*TRACECARD, "serve", "--db", str(tmp_path / "t.db")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("tracecard: settings: binding 0.0.0.0 exposes tracecard")
    assert len(result.stderr.splitlines()) == 1 and "Value error" not in result.stderr


def test_10_an_unexpected_error_has_no_traceback_unless_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracecard.server.cli import suites

    def boom(_args: object) -> int:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(suites, "_suite_check", boom)
    assert main(["suite", "check", "x.toml"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "tracecard: RuntimeError: disk on fire",
        "tracecard: unexpected: run again with --debug for the traceback",
    ]
    with pytest.raises(RuntimeError, match="disk on fire"):
        main(["suite", "check", "x.toml", "--debug"])


TYPO_SUITE = """schema_version = 1
name = "typo"

[[tasks]]
id = "first"
instruction = "do the first thing"

[[tasks]]
id = "second"
upstreams = []
"""


def _run_typo(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "suites").mkdir(exist_ok=True)
    (tmp_path / "suites" / "typo.toml").write_text(TYPO_SUITE)
    env = {**_clean_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:6006"}
    argv = ["run", "--suite", "suites/typo.toml", "--name", "x", "--agent", "true"]
    return subprocess.run(
        [*TRACECARD, *flags, *argv, "--port", "0", "--db", "t.db"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_11_13_run_names_the_suite_line_and_warns_about_a_foreign_otel_endpoint(
    tmp_path: Path,
) -> None:
    result = _run_typo(tmp_path)
    assert result.returncode == 2
    warning, error = result.stderr.splitlines()
    assert warning.startswith(
        "tracecard: warning: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006 is set: an "
    )
    assert "/v1/traces (TRACECARD_OTLP_ENDPOINT)" in warning
    # the path as given and tasks[1]'s own line, as `suite check` says it (not "request body")
    assert error == "tracecard: suites/typo.toml:8: tasks[1].instruction: required field is missing"


def test_8_log_level_reaches_the_embedded_server_of_run(tmp_path: Path) -> None:
    quiet = _run_typo(tmp_path)
    assert "HTTP Request" not in quiet.stderr and "DEBUG" not in quiet.stderr
    loud = _run_typo(tmp_path, "--log-level", "debug")
    assert loud.returncode == 2
    assert "DEBUG" in loud.stderr and "HTTP Request: POST" in loud.stderr, loud.stderr[-2000:]


def test_10_a_file_that_cannot_be_used_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # e.g. `tracecard export -o missing/dir/card.md`: the path and why, not "unexpected"
    from tracecard.server.cli import suites

    cli = sys.modules["tracecard.server.cli.main"]  # the module (the package exports `main`)

    def unwritable(_args: object) -> int:
        open("/nonexistent-u14/dir/card.md", "w")  # noqa: SIM115 - raises before anything
        return 0

    monkeypatch.setattr(suites, "_suite_check", unwritable)
    assert main(["suite", "check", "x.toml"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "tracecard: /nonexistent-u14/dir/card.md: No such file or directory"
    ]

    def interrupted() -> object:
        raise KeyboardInterrupt  # Ctrl-C while the commands are still being imported

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["--version"]) == 130
    assert capsys.readouterr().err == ""
