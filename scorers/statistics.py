"""The named statistics: one vocabulary for the CLI, the viewer, every export, the API and gates.

Per task x component, over the task's evaluated trials (n of them, c passing):
- `pass_rate` = c / n, the headline everywhere;
- `mean` = mean of the non-null values (partial credit);
- `pass@k` = 1 - C(n-c, k) / C(n, k) (at least one of k trials passes);
- `pass^k` = C(c, k) / C(n, k) (all k trials pass);
- `flip` = 1 when the trials both pass and fail, else 0.
Per experiment x component: the mean over tasks of each, with a 95% bootstrap interval over tasks.
docs/scorecards.md has the formulas; JSON keys are `pass_rate`, `mean`, `pass_at_k`,
`pass_hat_k` (by k) and `flip`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "HEADLINE",
    "STATISTICS",
    "StatisticName",
    "UnknownStatistic",
    "parse_statistic",
]

STATISTICS = ("pass_rate", "mean", "pass@k", "pass^k", "flip")
HEADLINE = "pass_rate"  # what a bare component name means (`--min outcome=0.8`)
_K = re.compile(r"pass(?P<kind>[@^])(?P<k>\d+)")


class UnknownStatistic(ValueError):
    """A statistic name that is not in the vocabulary (the message lists the valid ones)."""


@dataclass(frozen=True)
class StatisticName:
    """A statistic of the vocabulary; `k` for pass@k and pass^k."""

    name: str
    k: int | None = None

    def __str__(self) -> str:
        return self.name.replace("k", str(self.k)) if self.k is not None else self.name

    @property
    def field(self) -> str:
        """The JSON field that holds it (`pass_at_k`, `pass_hat_k` are keyed by k)."""
        return {"pass@k": "pass_at_k", "pass^k": "pass_hat_k"}.get(self.name, self.name)


def valid_statistics() -> str:
    """The vocabulary as an error message lists it."""
    return "pass_rate (the default), mean, pass@K, pass^K (K = 1, 2, ...), flip"


def parse_statistic(text: str) -> StatisticName:
    """`pass_rate`, `mean`, `flip`, `pass@K` or `pass^K` (K >= 1); else `UnknownStatistic`."""
    name = text.strip()
    if name in ("pass_rate", "mean", "flip"):
        return StatisticName(name)
    found = _K.fullmatch(name)
    if found and int(found["k"]) >= 1:
        return StatisticName(f"pass{found['kind']}k", int(found["k"]))
    raise UnknownStatistic(f"unknown statistic {text!r}; valid: {valid_statistics()}")
