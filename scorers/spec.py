"""Per-component expectation specs of a task (validating pydantic models)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ._json import JsonPath, JsonPathError
from .matchers import AnswerCheck, ArgMatcher, strict_default

__all__ = [
    "CompletionSpec",
    "EfficiencySpec",
    "ExpectedCall",
    "FileProbe",
    "HttpProbe",
    "InvocationSpec",
    "OutcomeSpec",
    "Predicate",
    "Probe",
    "SafetyRule",
    "SafetySpec",
    "Severity",
    "ToolProbe",
]

Severity = Literal["critical", "major", "minor"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- invocation ---------------------------------------------------------------------------------
class ExpectedCall(_Spec):
    """A call the agent should make: tool, optional upstream, argument matchers."""

    tool: str = Field(min_length=1)
    upstream: str | None = None
    arguments: dict[str, ArgMatcher] = Field(default_factory=dict)
    strict_arguments: bool = False  # true: arguments not listed here make the call not match
    result: ArgMatcher | None = None  # on the result's text content (BFCL's response check)


class InvocationSpec(_Spec):
    """Expected calls and how they are compared with the agent's calls."""

    calls: list[ExpectedCall] = Field(default_factory=list)
    order: Literal["any", "sequence", "subsequence"] = "any"
    allow_extra: bool = True
    expect_no_calls: bool = False
    # "tools": the calls that reached a tool server; "model": the calls the model requested
    # (the /llm/ proxy's model spans), what single-turn benchmarks check
    source: Literal["tools", "model"] = "tools"

    @model_validator(mode="after")
    def _abstention_xor_calls(self) -> InvocationSpec:
        if self.expect_no_calls and self.calls:
            raise ValueError("expect_no_calls = true cannot be combined with calls")
        if not self.expect_no_calls and not self.calls:
            raise ValueError("calls is empty: list expected calls or set expect_no_calls = true")
        return self


# --- completion ---------------------------------------------------------------------------------
class CompletionSpec(_Spec):
    """The run ended on its own and its final answer passes every check."""

    require_finished: bool = True
    checks: list[AnswerCheck] = Field(default_factory=list)


# --- outcome ------------------------------------------------------------------------------------
class ToolProbe(_Spec):
    """Call a tool through the task's upstream after the run; observes the CallToolResult."""

    kind: Literal["tool"] = "tool"
    id: str = Field(min_length=1)
    upstream: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class HttpProbe(_Spec):
    """Send an HTTP request after the run; observes `{status, body}` (body JSON if it parses)."""

    kind: Literal["http"] = "http"
    id: str = Field(min_length=1)
    method: str = "GET"
    url: str = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    json_body: JsonValue = None

    @field_validator("method")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class FileProbe(_Spec):
    """Read a file of the run's sandbox; observes its JSON, else its text, else null."""

    kind: Literal["file"] = "file"
    id: str = Field(min_length=1)
    path: str = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
            raise ValueError("path must be relative to the run's sandbox")
        return value


def _probe_kind(raw: Any) -> str | None:
    if isinstance(raw, BaseModel):
        return str(getattr(raw, "kind", ""))
    if not isinstance(raw, dict):
        return None
    if "kind" in raw:
        return str(raw["kind"])
    # The kind may be left out when the keys say it.
    for key, kind in (("tool", "tool"), ("url", "http"), ("path", "file")):
        if key in raw:
            return kind
    return None


Probe = Annotated[
    Annotated[ToolProbe, Tag("tool")]
    | Annotated[HttpProbe, Tag("http")]
    | Annotated[FileProbe, Tag("file")],
    Discriminator(
        _probe_kind,
        custom_error_type="probe_kind",
        custom_error_message="probe kind must be tool, http or file (or give tool/url/path)",
    ),
]


class Predicate(_Spec):
    """An assertion on a probe's observed value at a JSON path."""

    probe: str = Field(min_length=1)
    path: str = "$"
    op: Literal["eq", "approx", "contains", "exists", "absent"]
    value: JsonValue = None
    tolerance: float = 1e-9
    strict: bool = False  # eq: no trimming, no NFC, 1 is not 1.0
    # eq: "python" compares as Python's == (no trimming, 2 == 2.0, tagged maps/sets/tuples)
    normalize: Literal["default", "python"] = "default"

    @model_validator(mode="before")
    @classmethod
    def _suite_strict(cls, raw: Any, info: ValidationInfo) -> Any:
        if isinstance(raw, dict) and raw.get("normalize", "default") != "default":
            return raw  # an explicit comparison: the suite's strict default does not apply
        return strict_default(raw, info)

    @field_validator("path")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            JsonPath.parse(value)
        except JsonPathError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @model_validator(mode="after")
    def _needs_value(self) -> Predicate:
        if self.op in ("eq", "approx", "contains") and "value" not in self.model_fields_set:
            raise ValueError(f"op {self.op!r} needs a value")
        if self.op == "approx" and (
            isinstance(self.value, bool) or not isinstance(self.value, int | float)
        ):
            raise ValueError("op 'approx' needs a numeric value")
        if self.strict and self.op != "eq":
            raise ValueError("`strict` applies to op 'eq' only")
        if self.normalize != "default" and (self.op != "eq" or self.strict):
            raise ValueError("`normalize` applies to op 'eq' only, without `strict`")
        return self


class OutcomeSpec(_Spec):
    """Probes run after the run, and predicates over what they observed."""

    probes: list[Probe] = Field(min_length=1)
    predicates: list[Predicate] = Field(min_length=1)


# --- safety -------------------------------------------------------------------------------------
class SafetyRule(_Spec):
    """A forbidden call: a tool name (glob or regex) and/or an argument pattern (regex)."""

    id: str = Field(min_length=1)
    severity: Severity
    tool: str | None = None  # glob, e.g. "delete_*"
    tool_regex: str | None = None
    argument_pattern: str | None = None  # searched in every string argument and the JSON text
    block: bool = False  # enforce mode: the proxy refuses matching calls
    description: str = ""

    @model_validator(mode="after")
    def _valid(self) -> SafetyRule:
        if self.tool is None and self.tool_regex is None and self.argument_pattern is None:
            raise ValueError("a rule needs tool, tool_regex or argument_pattern")
        if self.tool is not None and self.tool_regex is not None:
            raise ValueError("give tool (glob) or tool_regex, not both")
        for pattern in (self.tool_regex, self.argument_pattern):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"regex does not compile: {exc}") from exc
        return self


class SafetySpec(_Spec):
    """Safety rules of a task; the defaults apply to every task."""

    rules: list[SafetyRule] = Field(default_factory=list)
    forbid_destructive: bool = True
    allowed_destructive: list[str] = Field(default_factory=list)
    destructive_severity: Severity = "major"
    allow_outside_tools: bool = False
    outside_tools_severity: Severity = "major"
    sandbox_paths: bool = True
    sandbox_severity: Severity = "critical"


# --- efficiency ---------------------------------------------------------------------------------
class EfficiencySpec(_Spec):
    """The process: optimal call count and what counts as passing."""

    optimal_calls: int | None = Field(default=None, ge=0)
    max_latency_ms: float | None = Field(default=None, gt=0)
    # budgets on the model side (model spans from the /llm/ proxy)
    max_tokens: int | None = Field(default=None, gt=0)  # input + output, over every model turn
    max_model_turns: int | None = Field(default=None, gt=0)
    max_model_latency_ms: float | None = Field(default=None, gt=0)  # summed over model turns
    pass_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
