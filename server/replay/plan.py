"""What an experiment replays: the source experiment, which side, and how requests are matched.

Stored with the experiment (`experiments.environment["replay"]`), validated here before any run
exists: the source must be on the same suite version and hold every trial the runs will ask for.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MatchMode = Literal["exact", "sequence", "ignore-args"]
OnMiss = Literal["error", "live"]
ReplayMode = Literal["tools", "model", "all"]


class UpstreamReplay(BaseModel):
    """How one upstream's requests are matched to recorded ones, and what a miss does."""

    model_config = ConfigDict(extra="forbid")

    match: MatchMode = "exact"
    ignore: list[str] = Field(default_factory=list)  # JSON paths, e.g. "$.arguments.timestamp"
    on_miss: OnMiss = "error"

    @field_validator("ignore")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("$.") or len(path) < 3:
                raise ValueError(f"ignore path {path!r} must start with '$.' (e.g. $.arguments.id)")
        return paths


class ReplayPlan(BaseModel):
    """`replay` of `POST /api/experiments`: answers from `source`'s runs instead of live ones.

    Each run takes the source run of the same task and trial (or of trial `trial` for all).
    `match`, `ignore` and `on_miss` apply to every upstream; `upstreams.NAME` overrides them."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=64)
    mode: ReplayMode = "tools"
    trial: int | None = Field(default=None, ge=0)
    match: MatchMode = "exact"
    ignore: list[str] = Field(default_factory=list)
    on_miss: OnMiss = "error"
    upstreams: dict[str, UpstreamReplay] = Field(default_factory=dict)

    @field_validator("ignore")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        return UpstreamReplay._paths(paths)

    def policy(self, upstream: str) -> UpstreamReplay:
        """The matching rules of `upstream` (its own section, else the plan's defaults)."""
        found = self.upstreams.get(upstream)
        if found is not None:
            return found
        return UpstreamReplay(match=self.match, ignore=self.ignore, on_miss=self.on_miss)

    def stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
