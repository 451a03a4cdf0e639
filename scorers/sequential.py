"""Trials until decided (docs/scorecards.md, "Trials until decided"): how many trials per task a
paired comparison needs to decide at the observed effect, and a sequential test that adds trials
in rounds and keeps its nominal error rate. Pure functions, standard library only.

Both work on the per-task paired differences of `compare_experiments` (pass rate B - pass rate
A, one per task), so the task is the unit, as in the comparison itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

from .scorecard import Scorecard

__all__ = [
    "Look",
    "TrialsEstimate",
    "boundaries",
    "estimate_trials",
    "look_levels",
    "sequential_look",
    "spent_alpha",
    "t_quantile",
    "t_sf",
    "trials_to_decide",
]

MIN_TASKS = 5  # as compare_experiments: fewer paired tasks never decide
_NORMAL = NormalDist()


# --- Student's t, from the regularized incomplete beta function -----------------------------
def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection on `t_sf`; p in (0, 1))."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), not {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_sf(high, df) > 1.0 - p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_sf(mid, df) > 1.0 - p:
            low = mid
        else:
            high = mid
        if high - low < 1e-10 * max(1.0, high):
            break
    return (low + high) / 2.0


# --- how many trials would decide ---------------------------------------------------------------
@dataclass(frozen=True)
class TrialsEstimate:
    """Trials per task (in each experiment) a paired comparison needs to decide, at the
    observed mean difference, with the given confidence and power."""

    effect: float  # observed mean of (B - A) over paired tasks
    tasks: int
    trials_now: int  # the fewest trials a paired task has, in either experiment
    between_variance: float  # spread of the true per-task differences (what trials cannot cut)
    trial_variance: float  # mean over tasks of pA(1-pA) + pB(1-pB): one trial's noise
    trials_needed: int | None  # per task, in each experiment; None: trials alone cannot decide
    additional: int | None
    reason: str


def trials_to_decide(
    a: Scorecard,
    b: Scorecard,
    component: str = "outcome",
    *,
    confidence: float = 0.95,
    power: float = 0.8,
) -> TrialsEstimate | None:
    """`estimate_trials` on the tasks two scorecards both evaluated on `component`."""
    stats_b = {t.task_id: t.component(component) for t in b.tasks}
    pairs = []
    for task in a.tasks:
        left, right = task.component(component), stats_b.get(task.task_id)
        if left and right and left.evaluated and right.evaluated:
            pairs.append(
                (left.passes / left.evaluated, left.evaluated, right.passes / right.evaluated,
                 right.evaluated)
            )  # fmt: skip
    return estimate_trials(pairs, confidence=confidence, power=power)


def estimate_trials(
    pairs: Sequence[tuple[float, int, float, int]],
    *,
    confidence: float = 0.95,
    power: float = 0.8,
) -> TrialsEstimate | None:
    """The trials per task at which the paired comparison would decide, were the observed
    effect the true one, from `(rate A, trials A, rate B, trials B)` per paired task (None:
    fewer than two). Normal approximation (docs/scorecards.md, "Trials until decided"):
        decided when  n d^2 / (z_{1-alpha/2} + z_{power})^2  >=  s_b^2 + V / k
    with d the mean difference over the n tasks, V the mean one-trial variance
    pA(1-pA) + pB(1-pB) (unbiased per task), and s_b^2 = max(0, s^2 - mean_i (VA_i/kA_i +
    VB_i/kB_i)) the between-task variance left when the trial noise is taken out of the
    differences' variance s^2; so k = V / (n d^2 / z^2 - s_b^2) when that is positive."""
    n = len(pairs)
    if n < 2:
        return None
    differences = [rb - ra for ra, _na, rb, _nb in pairs]
    effect = sum(differences) / n
    spread = sum((d - effect) ** 2 for d in differences) / (n - 1)

    def one_trial(rate: float, trials: int) -> float:
        return rate * (1 - rate) * (trials / (trials - 1) if trials > 1 else 1.0)

    noise_now = [one_trial(ra, na) / na + one_trial(rb, nb) / nb for ra, na, rb, nb in pairs]
    trial_variance = sum(one_trial(ra, na) + one_trial(rb, nb) for ra, na, rb, nb in pairs) / n
    between = max(0.0, spread - sum(noise_now) / n)
    trials_now = min(min(na, nb) for _ra, na, _rb, nb in pairs)
    z = _NORMAL.inv_cdf(1 - (1 - confidence) / 2) + _NORMAL.inv_cdf(power)
    room = n * effect * effect / (z * z) - between
    if n < MIN_TASKS or effect == 0.0 or room <= 0.0:
        if n < MIN_TASKS:
            reason = f"{n} paired task(s): at least {MIN_TASKS} are needed, whatever the trials"
        elif effect == 0.0:
            reason = "no difference observed: no number of trials decides"
        else:
            reason = (
                "the tasks differ too much among themselves: more trials cannot decide at "
                "this effect; more tasks can"
            )
        return TrialsEstimate(effect, n, trials_now, between, trial_variance, None, None, reason)
    needed = max(1, math.ceil(trial_variance / room)) if trial_variance > 0 else trials_now
    additional = max(0, needed - trials_now)
    reason = (
        f"{needed} trials per task in each experiment ({additional} more) would decide an effect "
        f"of {effect:+.3f} with {power:.0%} power at {confidence:.0%} confidence"
    )
    return TrialsEstimate(
        effect, n, trials_now, between, trial_variance, needed, additional, reason
    )


# --- the sequential procedure -------------------------------------------------------------------
Spending = Literal["obrien-fleming", "pocock"]


def spent_alpha(alpha: float, fraction: float, spending: Spending = "pocock") -> float:
    """Lan-DeMets alpha-spending: the error allowed up to `fraction` (0..1) of the looks.
    O'Brien-Fleming type: 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)); Pocock type: alpha ln(1+(e-1)t)."""
    t = min(max(fraction, 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if spending == "obrien-fleming":
        return 2.0 - 2.0 * _NORMAL.cdf(_NORMAL.inv_cdf(1 - alpha / 2) / math.sqrt(t))
    return alpha * math.log(1.0 + (math.e - 1.0) * t)


def look_levels(alpha: float, looks: int, spending: Spending = "pocock") -> list[float]:
    """The error each of `looks` equally spaced looks may spend: the spending function's
    increments (they add up to `alpha`)."""
    if looks < 1:
        raise ValueError("looks must be at least 1")
    spent = [spent_alpha(alpha, j / looks, spending) for j in range(looks + 1)]
    return [spent[j] - spent[j - 1] for j in range(1, looks + 1)]


_GRID = 241  # points of the density grid between the boundaries


@lru_cache(maxsize=64)
def boundaries(alpha: float, looks: int, spending: Spending = "pocock") -> tuple[float, ...]:
    """Two-sided z boundaries of `looks` equally spaced looks whose crossing probabilities under
    no effect are the spending function's increments, for the canonical joint distribution
    (Z_j = S(t_j)/sqrt(t_j), S a Brownian motion in information time t_j = j/looks): found look
    by look, carrying the density of S on a grid over the region not yet stopped
    (Armitage-McPherson-Rowe recursion)."""
    levels = look_levels(alpha, looks, spending)
    step = 1.0 / looks
    sigma = math.sqrt(step)
    found: list[float] = []
    points: list[float] = [0.0]  # S(0) = 0 with mass 1
    masses: list[float] = [1.0]
    for j, level in enumerate(levels, start=1):
        t = j * step

        def crossing(
            bound: float, points: list[float] = points, masses: list[float] = masses
        ) -> float:
            return sum(
                m * (_NORMAL.cdf((-bound - s) / sigma) + 1.0 - _NORMAL.cdf((bound - s) / sigma))
                for s, m in zip(points, masses, strict=True)
            )

        low, high = 0.0, 12.0 * math.sqrt(t)
        for _ in range(60):  # crossing() falls as the bound grows
            mid = (low + high) / 2.0
            low, high = (mid, high) if crossing(mid) > level else (low, mid)
        bound = (low + high) / 2.0
        found.append(bound / math.sqrt(t))
        width = 2.0 * bound / (_GRID - 1)
        grid = [-bound + i * width for i in range(_GRID)]
        weights = [width * (0.5 if i in (0, _GRID - 1) else 1.0) for i in range(_GRID)]
        scale = 1.0 / (sigma * math.sqrt(2.0 * math.pi))
        spread = -0.5 / (sigma * sigma)
        density = [
            scale
            * sum(m * math.exp(spread * (g - s) ** 2) for s, m in zip(points, masses, strict=True))
            for g in grid
        ]
        points, masses = grid, [d * w for d, w in zip(density, weights, strict=True)]
    return tuple(found)


@dataclass(frozen=True)
class Look:
    """One look of the sequential procedure at the paired differences."""

    look: int  # 1-based
    looks: int
    level: float  # this look's two-sided level
    statistic: float | None  # paired t = mean / (sd / sqrt(n)); None: not computable
    threshold: float | None
    verdict: Literal["A better", "B better", "undecided"]
    reason: str


def sequential_look(
    differences: Sequence[float],
    look: int,
    looks: int,
    *,
    alpha: float = 0.05,
    spending: Spending = "pocock",
) -> Look:
    """Decide at look `look` of `looks` on per-task differences (B - A): a paired t-test whose
    critical value is the look's group-sequential boundary (`boundaries`), read as a t quantile
    at the same nominal level for n - 1 degrees of freedom; undecided with fewer than 5 tasks."""
    z = boundaries(alpha, looks, spending)[look - 1]
    level = 2.0 * (1.0 - _NORMAL.cdf(z))  # the nominal two-sided level of this look
    n = len(differences)
    if n < MIN_TASKS:
        reason = f"{n} paired task(s); at least {MIN_TASKS} are needed to decide"
        return Look(look, looks, level, None, None, "undecided", reason)
    mean = sum(differences) / n
    variance = sum((d - mean) ** 2 for d in differences) / (n - 1)
    threshold = t_quantile(1.0 - level / 2.0, n - 1)
    if variance == 0.0:
        statistic = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    else:
        statistic = mean / math.sqrt(variance / n)
    if abs(statistic) <= threshold:
        reason = f"|t| = {abs(statistic):.2f} <= {threshold:.2f} (look {look} of {looks})"
        return Look(look, looks, level, statistic, threshold, "undecided", reason)
    verdict: Literal["A better", "B better"] = "B better" if statistic > 0 else "A better"
    reason = f"|t| = {abs(statistic):.2f} > {threshold:.2f} (look {look} of {looks})"
    return Look(look, looks, level, statistic, threshold, verdict, reason)
