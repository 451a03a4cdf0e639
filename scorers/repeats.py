"""Repeat statistics: unbiased pass@k and pass^k, bootstrap intervals, flip rate."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

__all__ = [
    "Interval",
    "bootstrap_mean",
    "bootstrap_means",
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


_SCALE_BITS = 32  # fixed point of a value in [0, 1] when columns are summed as one integer
_FIELD_BITS = 64  # room for the sum of 2**32 such values per column


def bootstrap_means(
    columns: Sequence[Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> list[Interval | None]:
    """`bootstrap_mean` of several columns of values in [0, 1] and of one length (statistics of
    the same tasks), from one set of resampled task indices (the draws `bootstrap_mean` makes
    with the same seed). Bounds agree with `bootstrap_mean`'s to 1e-9."""
    lengths = {len(column) for column in columns}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths: {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    if n == 0:
        return [None for _ in columns]
    if n == 1 or resamples <= 0:  # no spread to resample: each interval is its mean
        means = [sum(column) / n for column in columns]
        return [Interval(mean, mean, mean, n, confidence) for mean in means]
    if any(not 0.0 <= value <= 1.0 for column in columns for value in column):
        # outside [0, 1] the fixed-point packing does not hold: one draw per column
        return [
            bootstrap_mean(c, resamples=resamples, seed=seed, confidence=confidence)
            for c in columns
        ]
    # Each task's values packed into one integer (a fixed-point field per column), so that one
    # C-level sum per resample adds up every column at once.
    scale = 1 << _SCALE_BITS
    packed = [
        sum(round(column[i] * scale) << (j * _FIELD_BITS) for j, column in enumerate(columns))
        for i in range(n)
    ]
    rng = random.Random(seed)
    totals = [sum(rng.choices(packed, k=n)) for _ in range(resamples)]
    mask = (1 << _FIELD_BITS) - 1
    alpha = (1.0 - confidence) / 2.0
    out: list[Interval | None] = []
    for j, column in enumerate(columns):
        shift = j * _FIELD_BITS
        means = sorted(((total >> shift) & mask) / scale / n for total in totals)
        low, high = percentile(means, alpha), percentile(means, 1.0 - alpha)
        out.append(Interval(sum(column) / n, low, high, n, confidence))
    return out


def flip_rate(per_task_passes: Sequence[Sequence[bool]]) -> float | None:
    """Share of tasks whose evaluated trials include both a pass and a fail."""
    tasks = [p for p in per_task_passes if p]
    if not tasks:
        return None
    flipped = sum(1 for p in tasks if any(p) and not all(p))
    return flipped / len(tasks)
