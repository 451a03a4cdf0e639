"""Every `tracecard` command the README and the docs show is one the CLI accepts, and every
config snippet they show is valid (the quick-start scripts are run by CI and test_fresh_clone)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tracecard.server.cli.main import build_parser
from tracecard.server.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def _commands(path: Path) -> list[str]:
    commands = []
    for block in _blocks(path, "sh"):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            line = re.sub(r"^\.venv/bin/", "", line)
            # a usage synopsis ("[--timeout SECONDS]") is not a command to run
            if line.startswith("tracecard ") and "[-" not in line:
                commands.append(line)
    return commands


CASES = [(p.name, c) for p in DOCS for c in _commands(p)]


def test_the_readme_shows_the_cli() -> None:
    assert any(name == "README.md" for name, _ in CASES)


@pytest.mark.parametrize(("doc", "command"), CASES, ids=[f"{d}:{c[:40]}" for d, c in CASES])
def test_documented_command_parses(doc: str, command: str) -> None:
    words = shlex.split(re.sub(r"<[^>]+>", "X", command))[1:]
    try:
        build_parser().parse_args(words)
    except SystemExit as exc:  # argparse exits on a bad command line
        pytest.fail(f"{doc}: `{command}` is rejected by the CLI (exit {exc.code})")


def test_readme_config_snippets_are_valid_settings() -> None:
    for block in _blocks(ROOT / "README.md", "toml"):
        Settings.model_validate(tomllib.loads(block))


RUNS = [(doc, command) for doc, command in CASES if command.startswith("tracecard run ")]


@pytest.mark.parametrize(("doc", "command"), RUNS, ids=[f"{d}:{c[:60]}" for d, c in RUNS])
def test_documented_run_configures_the_suites_upstreams(doc: str, command: str) -> None:
    # Typed from a clone's root, `tracecard run` must find every upstream its suite uses: the
    # README's once had no --config ("suite 'helpdesk' uses upstream(s) helpdesk that this
    # server does not configure"). (A doc command with --server relies on that server.)
    from tracecard.scorers import load_suite
    from tracecard.server.settings import find_config, load_settings

    args = build_parser().parse_args(shlex.split(re.sub(r"<[^>]+>", "X", command))[1:])
    if args.server or not (ROOT / args.suite).is_file():
        pytest.skip("runs against a server of its own, or on a suite the reader writes")
    suite = load_suite(ROOT / args.suite)
    used = {name for task in suite.tasks for name in task.upstreams}
    config = ROOT / args.config if args.config else find_config(ROOT)
    configured = set(load_settings(config, environ={}).upstreams) if config else set()
    assert used <= configured, f"{doc}: `{command}` configures {configured or 'no upstream'}"
