"""Suites: the task file format, its validation with located errors, and its version hash."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from ._locate import LocatedIssue, dotted, find_line, reason_of, toml_error_line
from .scoring import Scoring
from .spec import CompletionSpec, EfficiencySpec, InvocationSpec, OutcomeSpec, SafetySpec
from .suite_text import decode_toml_nulls

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "Suite",
    "SuiteError",
    "SuiteIssue",
    "Task",
    "Turn",
    "load_suite",
    "parse_suite",
    "suite_version",
]

CURRENT_SCHEMA_VERSION = 2
SuiteFormat = Literal["toml", "json"]


class Turn(BaseModel):
    """One user turn of a multi-turn task: the message tracecard hands out, and what the agent
    should do before it asks for the next one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str = Field(min_length=1)
    invocation: InvocationSpec | None = None
    outcome: OutcomeSpec | None = None


class Task(BaseModel):
    """One task: what the agent is told, what it may use, and what each component expects."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    instruction: str = ""
    turns: list[Turn] = Field(default_factory=list)
    upstreams: list[str] = Field(default_factory=list)
    fixture: str | None = None
    # values a per-run upstream's command/env/cwd receive as `{task.NAME}` (v2)
    params: dict[str, str] = Field(default_factory=dict)
    tools: list[str] | None = None  # allowed tools; None allows any
    invocation: InvocationSpec | None = None
    completion: CompletionSpec | None = None
    outcome: OutcomeSpec | None = None
    safety: SafetySpec = Field(default_factory=SafetySpec)
    efficiency: EfficiencySpec = Field(default_factory=EfficiencySpec)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    # the suite's [scoring] (set by the suite, not written per task)
    _scoring: Scoring = PrivateAttr(default_factory=Scoring)

    @model_validator(mode="after")
    def _turns_or_task_level(self) -> Task:
        if any(t.invocation for t in self.turns) and self.invocation is not None:
            raise ValueError("give invocation per turn or for the task, not both")
        if any(t.outcome for t in self.turns) and self.outcome is not None:
            raise ValueError("give outcome per turn or for the task, not both")
        return self

    @property
    def scoring(self) -> Scoring:
        """The gate constants and composite weights of the task's suite."""
        return self._scoring

    @property
    def multi_turn(self) -> bool:
        """The task's user messages are handed out turn by turn (`POST .../turns/next`)."""
        return bool(self.turns)


class Suite(BaseModel):
    """A named set of tasks from one file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int
    name: str = Field(min_length=1)
    description: str = ""
    strict: bool = False  # the default of `strict` for every exact/one_of matcher and eq
    scoring: Scoring = Field(default_factory=Scoring)
    # a fault plan for every experiment on the suite (`seed`, `[[faults.rules]]`, a rule's
    # `task` glob for some tasks); read and checked by the server (docs/replay.md)
    faults: dict[str, Any] | None = None
    tasks: list[Task] = Field(min_length=1)

    @model_validator(mode="after")
    def _tasks_score_as_the_suite(self) -> Suite:
        # Every task carries the suite's [scoring] (scorers see one task, not the suite).
        tasks = []
        for task in self.tasks:
            if task.scoring != self.scoring:
                task = task.model_copy()
                task._scoring = self.scoring
            tasks.append(task)
        self.__dict__["tasks"] = tasks  # frozen: the same list, with the tasks it validated
        return self

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


class _DocumentIssues(Exception):
    """Problems a reader finds before validation, as (field location, reason)."""

    def __init__(self, issues: list[tuple[tuple[str | int, ...], str]]) -> None:
        self.issues = issues
        super().__init__(issues)


def _read_v1(document: dict[str, Any]) -> Suite:
    # Version 1: one instruction per task, no turns.
    issues: list[tuple[tuple[str | int, ...], str]] = []
    tasks = document.get("tasks")
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        for key in ("turns", "params"):
            if task.get(key):
                issues.append((("tasks", index, key), f"{key} need schema_version = 2"))
        issues += _task_scoring(task, index)
        if "instruction" not in task:
            issues.append((("tasks", index, "instruction"), "required field is missing"))
    return _validated(document, issues)


def _read_v2(document: dict[str, Any]) -> Suite:
    # Version 2: `turns = [{ user, invocation?, outcome? }]` beside (or instead of) instruction.
    issues: list[tuple[tuple[str | int, ...], str]] = []
    tasks = document.get("tasks")
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, dict) and "instruction" not in task and not task.get("turns"):
            issues.append((("tasks", index, "instruction"), "give an instruction or turns"))
        if isinstance(task, dict):
            issues += _task_scoring(task, index)
    return _validated(document, issues)


def _task_scoring(task: dict[str, Any], index: int) -> list[tuple[tuple[str | int, ...], str]]:
    if "scoring" not in task:
        return []
    reason = "scoring is set for the whole suite: write [scoring] at the top level"
    return [(("tasks", index, "scoring"), reason)]


def _validated(document: dict[str, Any], issues: list[tuple[tuple[str | int, ...], str]]) -> Suite:
    # The reader's own findings and the model's, reported together.
    try:
        context = {"strict_default": document.get("strict") is True}
        suite = Suite.model_validate(document, context=context)
    except ValidationError as exc:
        found = {loc for loc, _ in issues}  # the reader's reason for a field replaces pydantic's
        errors = [(_strip_tags(tuple(e["loc"])), reason_of(e)) for e in exc.errors()]
        errors = [(loc, _argument_named(document, loc, reason)) for loc, reason in errors]
        issues = issues + [(loc, reason) for loc, reason in errors if loc not in found]
        raise _DocumentIssues(issues) from exc
    if issues:
        raise _DocumentIssues(issues)
    return suite


def _argument_named(document: dict[str, Any], loc: tuple[str | int, ...], reason: str) -> str:
    # A matcher's error names its task (by id) and argument: a long suite numbers tasks by index.
    if len(loc) < 2 or loc[0] != "tasks" or not isinstance(loc[1], int) or "arguments" not in loc:
        return reason
    tasks = document.get("tasks")
    task = tasks[loc[1]] if isinstance(tasks, list) and loc[1] < len(tasks) else None
    position = loc.index("arguments")
    if not isinstance(task, dict) or position + 1 >= len(loc):
        return reason
    return f"task {task.get('id')!r}, argument {loc[position + 1]!r}: {reason}"


# One reader per schema version; an older reader converts to the current models.
_READERS: dict[int, Callable[[dict[str, Any]], Suite]] = {1: _read_v1, 2: _read_v2}


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
        outcomes: list[tuple[tuple[str | int, ...], OutcomeSpec | None]] = [
            (("tasks", index, "outcome"), task.outcome)
        ]
        outcomes += [
            (("tasks", index, "turns", t_index, "outcome"), turn.outcome)
            for t_index, turn in enumerate(task.turns)
        ]
        for where, outcome in outcomes:
            if outcome is not None:
                issues += _probe_issues(where, outcome)
    return issues


def _probe_issues(
    where: tuple[str | int, ...], outcome: OutcomeSpec
) -> list[tuple[tuple[str | int, ...], str]]:
    issues: list[tuple[tuple[str | int, ...], str]] = []
    probe_ids: set[str] = set()
    for p_index, probe in enumerate(outcome.probes):
        if probe.id in probe_ids:
            issues.append(((*where, "probes", p_index, "id"), f"duplicate probe id {probe.id!r}"))
        probe_ids.add(probe.id)
    for q_index, predicate in enumerate(outcome.predicates):
        if predicate.probe not in probe_ids:
            loc = (*where, "predicates", q_index, "probe")
            issues.append((loc, f"unknown probe {predicate.probe!r}"))
    return issues


def parse_suite(text: str, fmt: SuiteFormat, source_name: str = "<suite>") -> Suite:
    """Parse and validate suite text (TOML or JSON); raise SuiteError naming every problem."""
    try:
        document: Any = (
            decode_toml_nulls(tomllib.loads(text)) if fmt == "toml" else json.loads(text)
        )
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
        reason = f"required integer (current: {CURRENT_SCHEMA_VERSION})"
        raise SuiteError([located(("schema_version",), reason)])
    reader = _READERS.get(version)
    if reader is None:
        supported = ", ".join(str(v) for v in sorted(_READERS))
        reason = f"schema version {version} is not supported (supported: {supported})"
        raise SuiteError([located(("schema_version",), reason)])
    try:
        suite = reader(document)
    except _DocumentIssues as exc:
        raise SuiteError([located(loc, reason) for loc, reason in exc.issues]) from exc
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
    except FileNotFoundError as exc:  # worded as a missing config file is
        raise SuiteError([SuiteIssue(str(path), None, "", "no such suite file")]) from exc
    except OSError as exc:
        reason = f"cannot read: {exc.strerror or exc}"
        raise SuiteError([SuiteIssue(str(path), None, "", reason)]) from exc
    return parse_suite(text, fmt, str(path))  # the path as given, as the user typed it


def suite_version(suite: Suite) -> str:
    """sha256 of the canonical content: the same for TOML and JSON of the same suite."""
    document = suite.model_dump(mode="json")
    for task in document["tasks"]:
        for key in ("turns", "params"):
            if not task[key]:
                del task[key]  # a v1 task hashes as it did before these fields existed
    if suite.scoring.is_default:
        del document["scoring"]  # so does a suite that keeps the default gate and weights
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()
