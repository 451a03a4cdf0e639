from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracecard.scorers import bootstrap_mean, flip_rate, pass_at_k, pass_hat_k


@st.composite
def trials(draw: st.DrawFn) -> tuple[list[bool], int]:
    outcomes = draw(st.lists(st.booleans(), min_size=1, max_size=8))
    k = draw(st.integers(min_value=1, max_value=len(outcomes)))
    return outcomes, k


@given(trials())
def test_pass_at_k_and_pass_hat_k_match_enumeration_of_k_subsets(
    case: tuple[list[bool], int],
) -> None:
    outcomes, k = case
    subsets = list(itertools.combinations(outcomes, k))
    any_pass = sum(1 for s in subsets if any(s)) / len(subsets)
    all_pass = sum(1 for s in subsets if all(s)) / len(subsets)
    n, c = len(outcomes), sum(outcomes)
    assert pass_at_k(n, c, k) == pytest.approx(any_pass)
    assert pass_hat_k(n, c, k) == pytest.approx(all_pass)


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(5, 1, 1) == pytest.approx(0.2)
    assert pass_at_k(5, 1, 5) == 1.0
    assert pass_hat_k(5, 4, 2) == pytest.approx(6 / 10)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


@given(st.lists(st.floats(0, 1), min_size=2, max_size=40), st.integers(0, 2**32))
def test_bootstrap_is_reproducible_for_a_seed(values: list[float], seed: int) -> None:
    first = bootstrap_mean(values, seed=seed, resamples=200)
    again = bootstrap_mean(values, seed=seed, resamples=200)
    assert first == again
    assert (
        first is not None and first.low <= first.mean + 1e-12 and first.mean <= first.high + 1e-12
    )


def test_bootstrap_interval_narrows_with_more_tasks() -> None:
    rng = random.Random(1)
    few = bootstrap_mean([rng.random() for _ in range(10)])
    many = bootstrap_mean([rng.random() for _ in range(1000)])
    assert few is not None and many is not None
    assert many.high - many.low < few.high - few.low


def test_bootstrap_degenerate_inputs() -> None:
    assert bootstrap_mean([]) is None
    one = bootstrap_mean([0.4])
    assert one is not None and (one.low, one.high) == (0.4, 0.4)


def test_flip_rate() -> None:
    assert flip_rate([[True, False], [True, True], [False], []]) == pytest.approx(1 / 3)
    assert flip_rate([]) is None


def test_bootstrap_means_without_resamples_are_the_means() -> None:
    # resamples=0 (a value without its interval): each column's mean, over all its tasks
    from tracecard.scorers.repeats import bootstrap_means

    a, b = [0.5, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.4]
    for intervals in (bootstrap_means([a, b], resamples=0), bootstrap_means([a, b])):
        assert [i.mean if i else None for i in intervals] == [0.625, 0.85]
    still = bootstrap_means([a], resamples=0)[0]
    assert still is not None and (still.low, still.high, still.n) == (0.625, 0.625, 4)
