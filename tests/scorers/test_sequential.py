"""Trials until decided: the sequential procedure keeps its error rate (simulated on synthetic
paired data, 10,000 repetitions without an effect), decides earlier than a fixed design of the
same power when there is one, and the trials estimate is what its formula says."""

from __future__ import annotations

import math
import random

import pytest

from tracecard.scorers.scorecard import build_scorecard
from tracecard.scorers.sequential import (
    boundaries,
    look_levels,
    sequential_look,
    t_quantile,
    t_sf,
    trials_to_decide,
)
from tracecard.scorers.suite import parse_suite

TASKS, BASELINE_TRIALS, LOOKS, ALPHA = 20, 8, 5, 0.05


def _simulate(
    repetitions: int, effect: float, seed: int
) -> tuple[list[int | None], list[list[float]]]:
    """Per repetition: the look at which the procedure said "B better" or "A better" (None:
    never), and the t statistic at each look (for the fixed designs). A baseline of 8 trials
    per task, then one trial per task per round for the candidate, 5 rounds."""
    rng = random.Random(seed)
    stops: list[int | None] = []
    paths: list[list[float]] = []
    for _ in range(repetitions):
        rates = [rng.uniform(0.2, 0.8) for _ in range(TASKS)]
        baseline = [
            sum(rng.random() < p for _ in range(BASELINE_TRIALS)) / BASELINE_TRIALS for p in rates
        ]
        candidate = [min(1.0, p + effect) for p in rates]
        passes = [0] * TASKS
        stop, path = None, []
        for look in range(1, LOOKS + 1):
            passes = [c + (rng.random() < p) for c, p in zip(passes, candidate, strict=True)]
            differences = [c / look - a for c, a in zip(passes, baseline, strict=True)]
            decision = sequential_look(differences, look, LOOKS, alpha=ALPHA)
            path.append(decision.statistic or 0.0)
            if stop is None and decision.verdict != "undecided":
                stop = look
        stops.append(stop)
        paths.append(path)
    return stops, paths


def test_without_an_effect_the_false_decision_rate_stays_at_alpha() -> None:
    repetitions = 10_000
    stops, _paths = _simulate(repetitions, effect=0.0, seed=1)
    false_rate = sum(s is not None for s in stops) / repetitions
    simulation_error = 3 * math.sqrt(ALPHA * (1 - ALPHA) / repetitions)  # 3 standard errors
    assert false_rate <= ALPHA + simulation_error, false_rate
    # and it is not a procedure that never decides: it spends most of its alpha
    assert false_rate >= ALPHA / 3, false_rate


def test_with_an_effect_it_stops_earlier_than_a_fixed_design_of_the_same_power() -> None:
    repetitions = 2_000
    stops, paths = _simulate(repetitions, effect=0.2, seed=2)
    power = sum(s is not None for s in stops) / repetitions
    mean_trials = sum(s if s is not None else LOOKS for s in stops) / repetitions
    fixed_critical = t_quantile(1 - ALPHA / 2, TASKS - 1)
    fixed_power = {
        k: sum(abs(path[k - 1]) > fixed_critical for path in paths) / repetitions
        for k in range(1, LOOKS + 1)
    }
    same_power = min(k for k, p in fixed_power.items() if p >= power)
    assert power > 0.8
    assert mean_trials < same_power, (mean_trials, same_power, power, fixed_power)


def test_the_boundaries_are_the_published_pocock_type_ones() -> None:
    # Lan-DeMets, Pocock-type spending, 5 equally spaced looks, two-sided alpha 0.05
    assert [round(z, 3) for z in boundaries(0.05, 5)] == [2.438, 2.427, 2.41, 2.397, 2.386]
    assert boundaries(0.05, 1) == pytest.approx((1.96,), abs=1e-3)
    assert sum(look_levels(0.05, 5)) == pytest.approx(0.05)
    assert boundaries(0.05, 2, "obrien-fleming")[0] == pytest.approx(2.772, abs=1e-3)


def test_student_t() -> None:
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-5)
    assert t_quantile(0.975, 4) == pytest.approx(2.776445, abs=1e-5)
    assert t_sf(2.0, 5) == pytest.approx(0.050970, abs=1e-5)
    assert t_quantile(0.025, 10) == pytest.approx(-2.228139, abs=1e-5)


def test_fewer_than_five_tasks_never_decide() -> None:
    look = sequential_look([1.0, 1.0, 1.0, 1.0], 1, 1)
    assert look.verdict == "undecided" and "at least 5" in look.reason


SUITE = parse_suite(
    "schema_version = 1\nname = 's'\n"
    + "".join(
        f'[[tasks]]\nid = "t{i}"\ninstruction = "x"\n'
        '[tasks.completion]\nchecks = [{ contains = "ok" }]\n'
        for i in range(10)
    ),
    "toml",
)


def _card(experiment: str, passes: list[int], trials: int) -> object:
    from tracecard.scorers import RunRecord
    from tracecard.scorers.types import ComponentScore

    runs = []
    for index, passed in enumerate(passes):
        for trial in range(trials):
            ok = trial < passed
            score = ComponentScore(
                component="completion", value=float(ok), passed=ok, scorer="completion", version="2"
            )
            runs.append(
                RunRecord(
                    run_id=f"{experiment}{index}{trial}",
                    task_id=f"t{index}",
                    trial=trial,
                    status="finished",
                    components=[score],
                )
            )
    return build_scorecard(SUITE, {"id": experiment, "config": {"name": experiment}}, runs)


def test_trials_to_decide_follows_its_formula() -> None:
    a = _card("a", [1, 2, 1, 2, 1, 2, 1, 2, 1, 2], trials=4)
    b = _card("b", [2, 3, 2, 3, 2, 3, 2, 3, 2, 2], trials=4)
    estimate = trials_to_decide(a, b, "completion")
    assert estimate is not None
    d = [(pb - pa) / 4 for pa, pb in zip([1, 2] * 5, [2, 3, 2, 3, 2, 3, 2, 3, 2, 2], strict=True)]
    n, effect = len(d), sum(d) / len(d)
    assert estimate.effect == pytest.approx(effect)
    z = 1.959964 + 0.841621
    room = n * effect**2 / z**2 - estimate.between_variance
    assert estimate.trials_needed == math.ceil(estimate.trial_variance / room)
    assert estimate.additional == estimate.trials_needed - 4
    # no difference: no number of trials decides
    same = trials_to_decide(a, a, "completion")
    assert same is not None and same.trials_needed is None and "no difference" in same.reason
