"""The multiple alignment of tool-call sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracecard.viewer.align import align_calls, canonical_arguments

LOOKUP = ("lookup_order", '{"order_id":"A-1001"}')
BAD_LOOKUP = ("lookup_order", '{"order_id":"A1001"}')
REFUND = ("issue_refund", '{"amount":42.5}')
WRONG_REFUND = ("issue_refund", '{"amount":425}')


def column(rows: list[list[int | None]], trial: int) -> list[int | None]:
    return [row[trial] for row in rows]


def test_identical_trials_do_not_diverge() -> None:
    alignment = align_calls([[LOOKUP, REFUND]] * 5)
    assert alignment.rows == [[0] * 5, [1] * 5]
    assert alignment.first_divergence is None


def test_a_retry_opens_a_gap_instead_of_shifting_later_calls() -> None:
    alignment = align_calls([[LOOKUP, REFUND], [BAD_LOOKUP, LOOKUP, REFUND], [LOOKUP, REFUND]])
    assert alignment.rows == [[None, 0, None], [0, 1, 0], [1, 2, 1]]
    assert alignment.first_divergence == 0


def test_other_arguments_stay_on_the_same_row_and_mark_the_divergence() -> None:
    alignment = align_calls([[LOOKUP, REFUND], [LOOKUP, WRONG_REFUND], [LOOKUP]])
    assert alignment.rows == [[0, 0, 0], [1, 1, None]]
    assert alignment.first_divergence == 1


def test_five_trials_of_a_flaky_task() -> None:
    trials = [
        [LOOKUP, REFUND],
        [LOOKUP, WRONG_REFUND],
        [BAD_LOOKUP, LOOKUP, REFUND],
        [LOOKUP],
        [LOOKUP, REFUND],
    ]
    alignment = align_calls(trials)
    assert alignment.rows == [
        [None, None, 0, None, None],
        [0, 0, 1, 0, 0],
        [1, 1, 2, None, 1],
    ]
    assert alignment.first_divergence == 0


STATUS = ("get_status", '{"job":"J-1"}')
ANSWER = ("post_answer", '{"text":"done"}')


def test_identical_prefixes_align_with_no_gaps() -> None:
    # five trials that all poll first: the shared calls stay on shared rows, the gap comes
    # where the trials differ (after the third poll), not before the first
    trials = [[STATUS] * 3 + [ANSWER]] * 4 + [[STATUS] * 2 + [ANSWER]]
    alignment = align_calls(trials)
    assert alignment.rows == [[0] * 5, [1] * 5, [2, 2, 2, 2, None], [3, 3, 3, 3, 2]]
    # the two polls every trial made are one step; the divergence is the step after them
    assert alignment.steps == [range(0, 2), range(2, 3), range(3, 4)]
    assert alignment.first_divergence == 1


def test_repeats_collapse_into_one_step() -> None:
    fourteen = [LOOKUP] + [STATUS] * 14 + [ANSWER]
    three = [LOOKUP] + [STATUS] * 3 + [ANSWER]
    alignment = align_calls([fourteen, fourteen, three])
    assert alignment.steps == [range(0, 1), range(1, 4), range(4, 15), range(15, 16)]
    assert [alignment.rows[r] for r in (1, 3, 4, 14, 15)] == [
        [1, 1, 1], [3, 3, 3], [4, 4, None], [14, 14, None], [15, 15, 4]
    ]  # fmt: skip
    assert alignment.first_divergence == 2  # the 11 polls only two trials made
    # a repeat in one trial against other calls in another is not collapsed across them
    mixed = align_calls([[STATUS, STATUS, ANSWER], [STATUS, LOOKUP, ANSWER]])
    assert len(mixed.steps) == 3 and mixed.first_divergence == 1
    # every trial the same: one step per distinct run of calls, no divergence
    same = align_calls([[STATUS] * 14 + [ANSWER]] * 5)
    assert same.steps == [range(0, 14), range(14, 15)] and same.first_divergence is None


def test_a_gap_is_placed_where_the_sequences_differ() -> None:
    alignment = align_calls([[LOOKUP, LOOKUP, REFUND, REFUND], [LOOKUP, REFUND, REFUND]])
    assert alignment.rows == [[0, 0], [1, None], [2, 1], [3, 2]]
    assert alignment.first_divergence == 1
    # the same at the end: the longer trial's extra calls come after the shared ones
    alignment = align_calls([[LOOKUP, REFUND], [LOOKUP, REFUND, REFUND, REFUND]])
    assert alignment.rows == [[0, 0], [1, 1], [None, 2], [None, 3]]
    assert alignment.first_divergence == 2


def test_no_trials_and_no_calls() -> None:
    assert align_calls([]).rows == []
    assert align_calls([[], []]).first_divergence is None


def test_canonical_arguments_ignore_key_order() -> None:
    assert canonical_arguments({"b": 1, "a": [2]}) == canonical_arguments({"a": [2], "b": 1})


calls = st.lists(st.sampled_from([LOOKUP, BAD_LOOKUP, REFUND, WRONG_REFUND]), max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(calls, min_size=1, max_size=5))
def test_every_call_appears_once_in_order(trials: list[list[tuple[str, str]]]) -> None:
    alignment = align_calls(trials)
    for trial, sequence in enumerate(trials):
        placed = [i for i in column(alignment.rows, trial) if i is not None]
        assert placed == list(range(len(sequence)))
    assert all(any(i is not None for i in row) for row in alignment.rows)
    if alignment.first_divergence is None:
        assert all(t == trials[0] for t in trials)


def test_past_the_cap_calls_are_listed_by_position() -> None:
    # #14.15: bounded work; what lies beyond the cap is still every call, in order
    a = [("t", str(i)) for i in range(6)]
    b = [("x", "0"), *a[:5]]
    alignment = align_calls([a, b], cap=3)
    assert alignment.aligned_calls == 3 and alignment.aligned_rows is not None
    split = alignment.aligned_rows
    aligned, rest = alignment.rows[:split], alignment.rows[split:]
    assert [row for row in aligned if row[1] is not None][0] == [None, 0]  # the extra call: a gap
    assert rest == [[3, 3], [4, 4], [5, 5]]  # by position past the cap
    for trial, calls in enumerate((a, b)):
        assert [row[trial] for row in alignment.rows if row[trial] is not None] == list(
            range(len(calls))
        )
    assert align_calls([a, a]).aligned_calls is None  # under the cap: nothing is cut


def test_a_trial_identical_to_another_takes_its_rows() -> None:
    # the twin's rows, without a table of its own: the same as aligning it would give
    retry = [BAD_LOOKUP, LOOKUP, REFUND]
    alignment = align_calls([[LOOKUP, REFUND], retry, [LOOKUP], retry, [LOOKUP, REFUND]])
    assert column(alignment.rows, 3) == column(alignment.rows, 1) == [0, 1, 2]
    assert column(alignment.rows, 4) == column(alignment.rows, 0) == [None, 0, 1]
    assert column(alignment.rows, 2) == [None, 0, None]
