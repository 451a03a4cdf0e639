"""Suites: the task file format, its validation with located errors, and its version hash."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from ._locate import LocatedIssue, dotted, find_line, reason_of, toml_error_line
from .spec import CompletionSpec, EfficiencySpec, InvocationSpec, OutcomeSpec, SafetySpec

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "Suite",
    "SuiteError",
    "SuiteIssue",
    "Task",
    "load_suite",
    "parse_suite",
    "suite_version",
]

CURRENT_SCHEMA_VERSION = 1
SuiteFormat = Literal["toml", "json"]


class Task(BaseModel):
    """One task: what the agent is told, what it may use, and what each component expects."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    instruction: str
    upstreams: list[str] = Field(default_factory=list)
    fixture: str | None = None
    tools: list[str] | None = None  # allowed tools; None allows any
    invocation: InvocationSpec | None = None
    completion: CompletionSpec | None = None
    outcome: OutcomeSpec | None = None
    safety: SafetySpec = Field(default_factory=SafetySpec)
    efficiency: EfficiencySpec = Field(default_factory=EfficiencySpec)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class Suite(BaseModel):
    """A named set of tasks from one file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int
    name: str = Field(min_length=1)
    description: str = ""
    tasks: list[Task] = Field(min_length=1)

    def task(self, task_id: str) -> Task:
        """The task with this id (KeyError if absent)."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)


class SuiteIssue(LocatedIssue):
    """One problem in a suite file: `{file}:{line}: {field.path}: {reason}`."""


class SuiteError(ValueError):
    """A suite that cannot be read; the message names file, line, field path and reason."""

    def __init__(self, issues: list[SuiteIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


def _strip_tags(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    # Tagged unions put the tag (e.g. "file") into the location; users never wrote it.
    out: list[str | int] = []
    for i, step in enumerate(loc):
        if step in ("tool", "http", "file") and i > 0 and isinstance(loc[i - 1], int):
            if i >= 2 and loc[i - 2] == "probes":
                continue
        out.append(step)
    return tuple(out)


def _read_v1(document: dict[str, Any]) -> Suite:
    return Suite.model_validate(document)


# One reader per schema version; an older reader converts to the current models.
_READERS: dict[int, Callable[[dict[str, Any]], Suite]] = {1: _read_v1}


def _semantic_issues(suite: Suite) -> list[tuple[tuple[str | int, ...], str]]:
    issues: list[tuple[tuple[str | int, ...], str]] = []
    first: dict[str, int] = {}
    for index, task in enumerate(suite.tasks):
        if task.id in first:
            issues.append(
                (
                    ("tasks", index, "id"),
                    f"duplicate task id {task.id!r} (first at tasks[{first[task.id]}])",
                )
            )
        first.setdefault(task.id, index)
        if task.outcome is None:
            continue
        probe_ids: set[str] = set()
        for p_index, probe in enumerate(task.outcome.probes):
            if probe.id in probe_ids:
                loc = ("tasks", index, "outcome", "probes", p_index, "id")
                issues.append((loc, f"duplicate probe id {probe.id!r}"))
            probe_ids.add(probe.id)
        for q_index, predicate in enumerate(task.outcome.predicates):
            if predicate.probe not in probe_ids:
                loc = ("tasks", index, "outcome", "predicates", q_index, "probe")
                issues.append((loc, f"unknown probe {predicate.probe!r}"))
    return issues


def parse_suite(text: str, fmt: SuiteFormat, source_name: str = "<suite>") -> Suite:
    """Parse and validate suite text (TOML or JSON); raise SuiteError naming every problem."""
    try:
        document: Any = tomllib.loads(text) if fmt == "toml" else json.loads(text)
    except tomllib.TOMLDecodeError as exc:
        issue = SuiteIssue(source_name, toml_error_line(exc), "", f"not valid TOML: {exc}")
        raise SuiteError([issue]) from exc
    except json.JSONDecodeError as exc:
        issue = SuiteIssue(source_name, exc.lineno, "", f"not valid JSON: {exc.msg}")
        raise SuiteError([issue]) from exc
    if not isinstance(document, dict):
        raise SuiteError([SuiteIssue(source_name, None, "", "a suite is a table/object")])

    def located(loc: tuple[str | int, ...], reason: str) -> SuiteIssue:
        return SuiteIssue(source_name, find_line(text, loc, fmt), dotted(loc), reason)

    version = document.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise SuiteError([located(("schema_version",), "required integer (current: 1)")])
    reader = _READERS.get(version)
    if reader is None:
        supported = ", ".join(str(v) for v in sorted(_READERS))
        reason = f"schema version {version} is not supported (supported: {supported})"
        raise SuiteError([located(("schema_version",), reason)])
    try:
        suite = reader(document)
    except ValidationError as exc:
        issues = [located(_strip_tags(tuple(e["loc"])), reason_of(e)) for e in exc.errors()]
        raise SuiteError(issues) from exc
    problems = _semantic_issues(suite)
    if problems:
        raise SuiteError([located(loc, reason) for loc, reason in problems])
    return suite


def load_suite(path: str | Path) -> Suite:
    """Load a suite file; the format comes from the extension (.toml or .json)."""
    file = Path(path)
    fmt: SuiteFormat = "json" if file.suffix.lower() == ".json" else "toml"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError([SuiteIssue(str(file), None, "", f"cannot read: {exc}")]) from exc
    return parse_suite(text, fmt, str(path))  # the path as given, as the user typed it


def suite_version(suite: Suite) -> str:
    """sha256 of the canonical content: the same for TOML and JSON of the same suite."""
    canonical = orjson.dumps(suite.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()
