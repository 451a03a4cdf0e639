"""Fault plans: seeded rules that break an upstream's answers on purpose (docs/replay.md).

A rule names where (`upstream`, `tool`: globs), when (`nth` matching call, `after_ms` since the
run's first call, `probability` drawn from the run's seed) and what (`kind` and its values).
The decision is a pure function of (plan seed, task, trial, rule, matching-call count): the same
seed gives the same faulted calls, run after run. Checking a call is a few integer operations.
"""

from __future__ import annotations

import fnmatch
import re
import time
import tomllib
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

FaultKind = Literal[
    "latency_ms",
    "timeout",
    "jsonrpc_error",
    "tool_error",
    "http_status",
    "truncate",
    "corrupt",
    "drop_tool",
    "schema_change",
]
# Kinds that act on a `tools/list` answer (the rule's `tool` names the tools changed in it).
LIST_KINDS = frozenset({"drop_tool", "schema_change"})
# Kinds that need the upstream's real answer (they change it); the others replace it.
ANSWER_KINDS = frozenset({"truncate", "corrupt"}) | LIST_KINDS
# Kinds a model call (`/llm/`) takes: a delay, or an answer of the rule's own (server/faults/llm)
MODEL_CALL_KINDS = frozenset(
    {"latency_ms", "timeout", "jsonrpc_error", "tool_error", "http_status"}
)
_MASK = (1 << 64) - 1
_NAMES_CACHED = 4096  # (upstream, tool) pairs whose matching rules a run remembers


class FaultRule(BaseModel):
    """One rule of a fault plan."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""  # defaults to "rule-N" (its position, from 1)
    kind: FaultKind
    upstream: str = "*"
    tool: str = "*"  # an MCP tool name, or `METHOD /path` of a plain HTTP or model call
    task: str = "*"  # the runs of which tasks (a glob on the task id)
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    nth: int | None = Field(default=None, ge=1)  # only the nth matching call of the run
    after_ms: int | None = Field(default=None, ge=0)  # only after this long into the run
    ms: int = Field(default=0, ge=0, le=600_000)  # latency_ms: the delay; timeout: a wait first
    code: int = -32603  # jsonrpc_error
    message: str = "Internal error (injected by tracecard)"  # jsonrpc_error, tool_error, http
    status: int = Field(default=503, ge=400, le=599)  # http_status
    retry_after: int | None = Field(default=1, ge=0)  # http_status: Retry-After seconds
    keep: int = Field(default=16, ge=0)  # truncate: characters of text (bytes of HTTP) kept

    @model_validator(mode="after")
    def _values(self) -> FaultRule:
        if self.kind == "latency_ms" and self.ms <= 0:
            raise ValueError("a latency_ms rule needs ms > 0, e.g. ms = 2000")
        return self


class FaultPlan(BaseModel):
    """`faults` of `POST /api/experiments`, or a `--faults plan.toml` file."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    rules: list[FaultRule] = Field(min_length=1)

    @model_validator(mode="after")
    def _ids(self) -> FaultPlan:
        seen: set[str] = set()
        for number, rule in enumerate(self.rules, 1):
            rule.id = rule.id or f"rule-{number}"
            if rule.id in seen:
                raise ValueError(f"two fault rules have the id {rule.id!r}")
            seen.add(rule.id)
        return self

    def stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def read_plan(path: str, text: str) -> FaultPlan:
    """A plan from TOML text; a `ValueError` naming the file and the field otherwise."""
    try:
        return FaultPlan.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{path}: {where}: {first['msg']}") from None


def _glob(pattern: str) -> re.Pattern[str] | str:
    """An exact name stays a string (compared with ==); a glob becomes one compiled regex."""
    if not any(c in pattern for c in "*?["):
        return pattern
    return re.compile(fnmatch.translate(pattern))


def _matches(pattern: re.Pattern[str] | str, value: str) -> bool:
    if isinstance(pattern, str):
        return pattern == value
    return pattern.match(value) is not None


def _mix(value: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit number from any 64-bit input."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


@dataclass(slots=True)
class _Compiled:
    rule: FaultRule
    upstream: re.Pattern[str] | str
    tool: re.Pattern[str] | str
    salt: int
    threshold: int  # probability as a 64-bit threshold
    seen: int = 0  # matching calls so far in this run


@dataclass(slots=True)
class RunFaults:
    """One run's copy of a plan: its seed, its rules' counters, when it started."""

    seed: int
    rules: list[_Compiled]
    started: float | None = None  # monotonic time of the run's first checked call
    injected: list[dict[str, Any]] = field(default_factory=list)  # what was injected, in order
    # the rules that match a (upstream, tool, for_list, model): globs matched once per name
    _matching: dict[tuple[str, str, bool, bool], list[_Compiled]] = field(default_factory=dict)

    def _rules_for(self, upstream: str, tool: str, for_list: bool, model: bool) -> list[_Compiled]:
        return [
            c
            for c in self.rules
            if (c.rule.kind in LIST_KINDS) == for_list
            and _matches(c.upstream, upstream)
            and (for_list or _matches(c.tool, tool))
            and (not model or (c.rule.upstream != "*" and c.rule.kind in MODEL_CALL_KINDS))
        ]

    def check(
        self, upstream: str, tool: str, for_list: bool = False, model: bool = False
    ) -> FaultRule | None:
        """The rule that fires on this call, if any (counts the call for every matching rule).

        `for_list`: the call is a `tools/list` (only `drop_tool` / `schema_change` rules, whose
        `tool` glob names the tools changed in the answer, apply to it). `model`: a model call
        (`/llm/`), reached only by a rule that names its upstream (not `*`) with a kind in
        `MODEL_CALL_KINDS`."""
        key = (upstream, tool, for_list, model)
        matching = self._matching.get(key)
        if matching is None:
            matching = self._rules_for(upstream, tool, for_list, model)
            if len(self._matching) < _NAMES_CACHED:  # plain HTTP paths may be unbounded
                self._matching[key] = matching
        if self.started is None:
            self.started = time.monotonic()
        fired: FaultRule | None = None
        for compiled in matching:
            compiled.seen += 1
            if fired is not None:
                continue
            rule = compiled.rule
            if rule.nth is not None and compiled.seen != rule.nth:
                continue
            if (
                rule.after_ms is not None
                and (time.monotonic() - self.started) * 1000 < rule.after_ms
            ):
                continue
            if compiled.threshold <= _MASK:
                draw = _mix(self.seed ^ compiled.salt ^ (compiled.seen * 0x2545F4914F6CDD1D))
                if draw >= compiled.threshold:
                    continue
            fired = rule
        return fired

    def tool_matches(self, rule: FaultRule, tool: str) -> bool:
        """Whether a `drop_tool` / `schema_change` rule changes `tool` in a listing."""
        compiled = next(c for c in self.rules if c.rule is rule)
        return _matches(compiled.tool, tool)


def run_faults(plan: FaultPlan, task_id: str, trial: int) -> RunFaults:
    """A run's fault state: its seed from the plan's seed, its task and its trial."""
    seed = _mix(plan.seed ^ zlib.crc32(f"{task_id}\0{trial}".encode()))
    mine = [rule for rule in plan.rules if fnmatch.fnmatchcase(task_id, rule.task)]
    rules = [
        _Compiled(
            rule,
            _glob(rule.upstream),
            _glob(rule.tool),
            _mix(zlib.crc32(rule.id.encode())),
            _MASK + 1 if rule.probability >= 1 else int(rule.probability * (_MASK + 1)),
        )
        for rule in mine
    ]
    return RunFaults(seed, rules)
