"""Multiple alignment of tool-call sequences (one per trial), keyed by (tool, canonical args).

Progressive alignment: the trial most similar to all others is the seed; each other trial, most
similar first, is aligned to the growing profile by Needleman-Wunsch. A profile column matches a
call as well as the best call already in it, so a retried or skipped call opens a gap instead of
shifting every later call by one (which index-by-index comparison would do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

CallKey = tuple[str, str]  # (tool name, canonical JSON of the arguments)

MATCH: Final = 3  # same tool, same arguments
SAME_TOOL: Final = 1  # same tool, other arguments
MISMATCH: Final = -2  # different tools
GAP: Final = -1


def canonical_arguments(arguments: Any) -> str:
    """Key-sorted compact JSON: two argument objects that differ only in key order are equal."""
    try:
        options = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
        return orjson.dumps(arguments, option=options).decode()
    except TypeError:
        return repr(arguments)


def pair_score(a: CallKey, b: CallKey) -> int:
    """How well two calls align."""
    if a == b:
        return MATCH
    return SAME_TOOL if a[0] == b[0] else MISMATCH


@dataclass(frozen=True)
class Alignment:
    """`rows[r][t]` is the index of trial t's call in aligned row r, or None for a gap."""

    rows: list[list[int | None]]
    first_divergence: int | None

    @property
    def width(self) -> int:
        """Number of trials."""
        return len(self.rows[0]) if self.rows else 0


def _column_score(column: list[CallKey], key: CallKey) -> int:
    return max((pair_score(k, key) for k in column), default=GAP)


def _align_to_profile(
    profile: list[list[CallKey]], sequence: Sequence[CallKey]
) -> list[tuple[int | None, int | None]]:
    """Needleman-Wunsch of `sequence` against `profile`: pairs (profile column, sequence index)."""
    n, m = len(profile), len(sequence)
    score = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        score[i][0] = i * GAP
    for j in range(1, m + 1):
        score[0][j] = j * GAP
    for i in range(1, n + 1):
        row, above = score[i], score[i - 1]
        column = profile[i - 1]
        for j in range(1, m + 1):
            row[j] = max(
                above[j - 1] + _column_score(column, sequence[j - 1]),
                above[j] + GAP,
                row[j - 1] + GAP,
            )
    pairs: list[tuple[int | None, int | None]] = []
    i, j = n, m
    while i > 0 or j > 0:
        if (
            i > 0
            and j > 0
            and score[i][j] == score[i - 1][j - 1] + _column_score(profile[i - 1], sequence[j - 1])
        ):
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and score[i][j] == score[i - 1][j] + GAP:
            pairs.append((i - 1, None))
            i -= 1
        else:
            pairs.append((None, j - 1))
            j -= 1
    pairs.reverse()
    return pairs


def _pair_similarity(a: Sequence[CallKey], b: Sequence[CallKey]) -> int:
    pairs = _align_to_profile([[k] for k in a], b)
    total = 0
    for i, j in pairs:
        total += GAP if i is None or j is None else pair_score(a[i], b[j])
    return total


def align_calls(sequences: Sequence[Sequence[CallKey]]) -> Alignment:
    """Align every trial's calls into shared rows and find the first row where trials differ."""
    count = len(sequences)
    if count == 0:
        return Alignment(rows=[], first_divergence=None)
    similarity = [[0] * count for _ in range(count)]
    for a in range(count):
        for b in range(a + 1, count):
            similarity[a][b] = similarity[b][a] = _pair_similarity(sequences[a], sequences[b])
    seed = max(range(count), key=lambda t: (sum(similarity[t]), -t))
    order = sorted((t for t in range(count) if t != seed), key=lambda t: (-similarity[seed][t], t))
    rows: list[list[int | None]] = [
        [i if t == seed else None for t in range(count)] for i in range(len(sequences[seed]))
    ]
    profile: list[list[CallKey]] = [[key] for key in sequences[seed]]
    for trial in order:
        merged_rows: list[list[int | None]] = []
        merged_profile: list[list[CallKey]] = []
        for column, index in _align_to_profile(profile, sequences[trial]):
            if column is None:
                row: list[int | None] = [None] * count
                keys: list[CallKey] = []
            else:
                row, keys = rows[column], list(profile[column])
            if index is not None:
                row[trial] = index
                keys.append(sequences[trial][index])
            merged_rows.append(row)
            merged_profile.append(keys)
        rows, profile = merged_rows, merged_profile

    def key_at(row: list[int | None], trial: int) -> CallKey | None:
        index = row[trial]
        return None if index is None else sequences[trial][index]

    divergence = next(
        (
            r
            for r, row in enumerate(rows)
            if len({key_at(row, t) for t in range(count)}) > 1
        ),
        None,
    )
    return Alignment(rows=rows, first_divergence=divergence)
