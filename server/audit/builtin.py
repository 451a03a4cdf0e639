"""`--agent builtin:NAME[:SEED]`: the command line of a built-in baseline agent."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from tracecard.scorers.suite import Suite, SuiteError, load_suite

__all__ = [
    "BUILTIN_PREFIX",
    "BuiltinAgentError",
    "builtin_argv",
    "builtin_command",
    "is_builtin",
    "write_tasks",
]

BUILTIN_PREFIX = "builtin:"
_KINDS = ("null", "oracle", "random-tool")


class BuiltinAgentError(ValueError):
    """A `builtin:` agent name that does not exist, or a seed that is not a number."""


def is_builtin(agent: str) -> bool:
    """Whether `--agent` names a built-in baseline rather than a command."""
    return agent.strip().startswith(BUILTIN_PREFIX)


def write_tasks(suite: Suite, directory: Path) -> Path:
    """The suite's tasks as JSON (task id -> task), where the agent processes read their own;
    named by the suite's content, so repeated runs of one suite reuse the file."""
    tasks = {t.id: t.model_dump(mode="json", exclude_defaults=True) for t in suite.tasks}
    text = json.dumps({"suite": suite.name, "tasks": tasks}, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"tasks-{digest}.json"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    return path.resolve()


def builtin_command(agent: str, suite: Suite, directory: Path) -> list[str]:
    """`builtin:null`, `builtin:oracle`, `builtin:random-tool[:SEED]` as the argv of one trial:
    `python -m tracecard.server.audit.agents KIND --tasks FILE [--seed SEED]`."""
    name = agent.strip()[len(BUILTIN_PREFIX) :]
    kind, _, seed = name.partition(":")
    if kind not in _KINDS:
        raise BuiltinAgentError(
            f"--agent {agent}: no such built-in agent; known: "
            + ", ".join(BUILTIN_PREFIX + k for k in _KINDS)
        )
    if seed and not seed.lstrip("-").isdigit():
        raise BuiltinAgentError(f"--agent {agent}: the seed after {kind}: must be an integer")
    argv = [sys.executable, "-m", "tracecard.server.audit.agents", kind]
    argv += ["--tasks", str(write_tasks(suite, directory))]
    return argv + (["--seed", seed] if seed else [])


def builtin_argv(agent: str, suite_path: str | Path, directory: Path) -> list[str]:
    """`builtin_command` for the suite file `tracecard run --suite` names."""
    try:
        suite = load_suite(suite_path)
    except SuiteError as exc:
        raise BuiltinAgentError(str(exc)) from exc
    return builtin_command(agent, suite, directory)
