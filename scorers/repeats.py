"""Repeat statistics: unbiased pass@k and pass^k, bootstrap intervals, flip rate."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

__all__ = [
    "Interval",
    "bootstrap_mean",
    "flip_rate",
    "pass_at_k",
    "pass_hat_k",
    "percentile",
]

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k trials drawn from n (c passing) passes: 1 - C(n-c,k)/C(n,k)."""
    _check(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: chance that all of k trials drawn from n (c passing) pass: C(c,k)/C(n,k)."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 1]) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_values) - 1)
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


@dataclass(frozen=True)
class Interval:
    """A mean with its percentile-bootstrap interval."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float

    def contains(self, value: float) -> bool:
        """Whether `value` lies inside the closed interval."""
        return self.low <= value <= self.high


def bootstrap_mean(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Interval | None:
    """Mean of `values` with a seeded percentile-bootstrap interval; None for no values."""
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    if n == 1 or resamples <= 0:
        return Interval(mean, mean, mean, n, confidence)
    rng = random.Random(seed)
    pool = list(values)
    draw = rng.choices
    # choices() draws indices in C-speed batches; sum/n per resample keeps this pure Python fast.
    means = sorted(sum(draw(pool, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - confidence) / 2.0
    return Interval(mean, percentile(means, alpha), percentile(means, 1.0 - alpha), n, confidence)


def flip_rate(per_task_passes: Sequence[Sequence[bool]]) -> float | None:
    """Share of tasks whose evaluated trials include both a pass and a fail."""
    tasks = [p for p in per_task_passes if p]
    if not tasks:
        return None
    flipped = sum(1 for p in tasks if any(p) and not all(p))
    return flipped / len(tasks)
