"""Values the scorers exchange: run facts in, component scores out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["COMPONENTS", "ComponentScore", "RunFacts", "RunScores", "RunStatus", "Span"]

RunStatus = Literal["finished", "errored", "timed_out", "aborted", "running", "pending"]
# A stored span in the JSON API shape (see DESIGN.md "JSON API").
Span = dict[str, Any]
# Display and export order of the built-in components.
COMPONENTS: tuple[str, ...] = (
    "invocation",
    "completion",
    "outcome",
    "safety",
    "efficiency",
    "composite",
)


@dataclass(frozen=True)
class RunFacts:
    """What the server knows about a run besides its spans."""

    status: RunStatus
    final_answer: str | None = None
    sandbox: str | None = None


class ComponentScore(BaseModel):
    """One component's score of one run; `value`/`passed` are None when not evaluated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    component: str
    value: float | None
    passed: bool | None
    evidence: dict[str, Any] = Field(default_factory=dict)
    scorer: str
    version: str

    @property
    def evaluated(self) -> bool:
        """True when the scorer reached a value ("not evaluated" is never a pass)."""
        return self.value is not None


class RunScores(BaseModel):
    """Every component score of a run plus the cross-component flags."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    components: list[ComponentScore]
    flags: list[str]

    def get(self, component: str) -> ComponentScore | None:
        """The score of `component`, if it was scored."""
        return next((c for c in self.components if c.component == component), None)
