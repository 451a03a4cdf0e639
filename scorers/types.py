"""Values the scorers exchange: run facts in, component scores out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FINAL_STATUSES",
    "LIVE_STATUSES",
    "RUN_STATUSES",
    "ComponentScore",
    "RunFacts",
    "RunScores",
    "RunStatus",
    "Span",
]

# A run's status; the one list the API, the viewer, the CLI and the scorers check against.
RunStatus = Literal["pending", "running", "finished", "errored", "timed_out", "aborted"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
LIVE_STATUSES: tuple[RunStatus, ...] = ("pending", "running")
# A run in a final status has ended (on its own or not) and can be scored.
FINAL_STATUSES: tuple[RunStatus, ...] = tuple(s for s in RUN_STATUSES if s not in LIVE_STATUSES)
# A stored span in the JSON API shape (see DESIGN.md "JSON API").
Span = dict[str, Any]


@dataclass(frozen=True)
class RunFacts:
    """What the server knows about a run besides its spans."""

    status: RunStatus
    final_answer: str | None = None
    sandbox: str | None = None
    # The database's fingerprint of a value (`[redacted:…]`), for matching redacted values;
    # None: redacted values cannot be compared (their matchers are not evaluated).
    fingerprint: Callable[[Any], str] | None = None


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
