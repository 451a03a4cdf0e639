"""Multiple alignment of tool-call sequences (one per trial), keyed by (tool, canonical args).

Progressive alignment: the trial most similar to all others is the seed; each other trial, most
similar first, is aligned to the growing profile by Needleman-Wunsch. A profile column matches a
call as well as the best call already in it, so a retried or skipped call opens a gap instead of
shifting every later call by one (which index-by-index comparison would do).

Bounded: the first `ALIGN_CAP` calls of each trial are aligned; calls after that are listed by
position (row r holds each trial's (cap + r)-th call), and `Alignment.aligned_calls` says where
that starts. A column's score is a set lookup and the similarity that picks the seed is a
multiset overlap, so 10 trials x 300 calls cost k-1 alignments of cap x cap cells (fewer when
trials repeat one another exactly: a twin takes its twin's rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

CallKey = tuple[str, str]  # (tool name, canonical JSON of the arguments)

MATCH: Final = 3  # same tool, same arguments
SAME_TOOL: Final = 1  # same tool, other arguments
MISMATCH: Final = -2  # different tools
GAP: Final = -1
ALIGN_CAP: Final = 100  # calls per trial that are aligned; later ones are listed by position


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
    """`rows[r][t]` is the index of trial t's call in aligned row r, or None for a gap.

    `steps` are the rows with repeats collapsed: each is a range of consecutive rows in which
    every trial repeats its call of the range's first row (or keeps its gap), shown as one step
    ("×14"). `first_divergence` is the index of the first step where the trials differ."""

    rows: list[list[int | None]]
    first_divergence: int | None
    aligned_calls: int | None = None  # when set: calls from this index on are not aligned
    aligned_rows: int | None = None  # ... and they start at this row
    steps: list[range] = field(default_factory=list)

    @property
    def width(self) -> int:
        """Number of trials."""
        return len(self.rows[0]) if self.rows else 0


class _Column:
    """A profile column: the calls aligned in it, as sets for constant-time scoring."""

    __slots__ = ("keys", "tools")

    def __init__(self, keys: Sequence[CallKey] = ()) -> None:
        self.keys = set(keys)
        self.tools = {key[0] for key in keys}

    def add(self, key: CallKey) -> None:
        self.keys.add(key)
        self.tools.add(key[0])

    def scores(self, sequence: Sequence[CallKey]) -> list[int]:
        """The best `pair_score` of each call of `sequence` against any call in the column."""
        keys, tools = self.keys, self.tools
        if not keys:
            return [GAP] * len(sequence)
        return [
            MATCH if key in keys else SAME_TOOL if key[0] in tools else MISMATCH for key in sequence
        ]


def _align_to_profile(
    profile: Sequence[_Column], sequence: Sequence[CallKey]
) -> list[tuple[int | None, int | None]]:
    """Needleman-Wunsch of `sequence` against `profile`: pairs (profile column, sequence index).

    Among equally good alignments, the one whose gaps come latest: the table is filled over
    both sequences reversed and traced back from their first calls, preferring a pair to a
    gap, so a shared prefix (five trials that all start with the same call, or the same call
    repeated) stays on shared rows and the gap opens where the sequences first differ."""
    n, m = len(profile), len(sequence)
    pairs = _align_reversed(profile[::-1], sequence[::-1])
    return [(None if i is None else n - 1 - i, None if j is None else m - 1 - j) for i, j in pairs]


def _align_reversed(
    profile: Sequence[_Column], sequence: Sequence[CallKey]
) -> list[tuple[int | None, int | None]]:
    """Needleman-Wunsch of the reversed sequences; the traceback runs from their ends (the
    original sequences' first calls), so the pairs come in the original order."""
    n, m = len(profile), len(sequence)
    score = [[j * GAP for j in range(m + 1)]]
    match = [column.scores(sequence) for column in profile]
    for i in range(1, n + 1):
        above = score[i - 1]
        left = i * GAP
        row = [left]
        append = row.append
        # diagonal: above[j-1] + the pair's score; up: above[j]; side: row[j-1] (up and side
        # both pay GAP, so the larger of them competes with the diagonal)
        for diagonal, up, cell in zip(above, above[1:], match[i - 1], strict=False):
            diagonal += cell
            up = (up if up >= left else left) + GAP
            left = diagonal if diagonal >= up else up
            append(left)
        score.append(row)
    pairs: list[tuple[int | None, int | None]] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and score[i][j] == score[i - 1][j - 1] + match[i - 1][j - 1]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and score[i][j] == score[i - 1][j] + GAP:
            pairs.append((i - 1, None))
            i -= 1
        else:
            pairs.append((None, j - 1))
            j -= 1
    return pairs


class _Bag:
    """A trial's calls and tools as multisets, counted once for every pair it is in."""

    __slots__ = ("calls", "size", "tools")

    def __init__(self, sequence: Sequence[CallKey]) -> None:
        self.calls = Counter(sequence)
        self.tools = Counter(key[0] for key in sequence)
        self.size = len(sequence)


def _pair_similarity(a: _Bag, b: _Bag) -> int:
    """How alike two trials are, order aside: shared calls, shared tools, the rest as gaps."""
    same = sum((a.calls & b.calls).values())
    tools = sum((a.tools & b.tools).values())
    return same * MATCH + (tools - same) * SAME_TOOL + (a.size + b.size - 2 * tools) * GAP


def align_calls(sequences: Sequence[Sequence[CallKey]], cap: int = ALIGN_CAP) -> Alignment:
    """Align every trial's calls into shared rows and find the first row where trials differ;
    past `cap` calls per trial, rows list the remaining calls by position."""
    count = len(sequences)
    if count == 0:
        return Alignment(rows=[], first_divergence=None)
    full = sequences
    sequences = [list(s[:cap]) for s in full]
    bags = [_Bag(s) for s in sequences]
    similarity = [[0] * count for _ in range(count)]
    for a in range(count):
        for b in range(a + 1, count):
            similarity[a][b] = similarity[b][a] = _pair_similarity(bags[a], bags[b])
    seed = max(range(count), key=lambda t: (sum(similarity[t]), -t))
    order = sorted((t for t in range(count) if t != seed), key=lambda t: (-similarity[seed][t], t))
    rows: list[list[int | None]] = [
        [i if t == seed else None for t in range(count)] for i in range(len(sequences[seed]))
    ]
    profile: list[_Column] = [_Column([key]) for key in sequences[seed]]
    # A trial that made exactly the calls of one already aligned goes on its twin's rows: every
    # call a MATCH and no extra gap, which no other placement beats (no table to fill).
    placed = {tuple(sequences[seed]): seed}
    for trial in order:
        twin = placed.setdefault(tuple(sequences[trial]), trial)
        if twin != trial:
            for twin_row in rows:
                twin_row[trial] = twin_row[twin]
            continue
        merged_rows: list[list[int | None]] = []
        merged_profile: list[_Column] = []
        for column, index in _align_to_profile(profile, sequences[trial]):
            if column is None:
                row: list[int | None] = [None] * count
                keys = _Column()
            else:
                row, keys = rows[column], profile[column]
            if index is not None:
                row[trial] = index
                keys.add(sequences[trial][index])
            merged_rows.append(row)
            merged_profile.append(keys)
        rows, profile = merged_rows, merged_profile
    aligned_rows = len(rows)
    longest = max(len(s) for s in full)
    rows += [
        [cap + r if cap + r < len(full[t]) else None for t in range(count)]
        for r in range(max(0, longest - cap))
    ]
    sequences = full

    def key_at(row: list[int | None], trial: int) -> CallKey | None:
        index = row[trial]
        return None if index is None else sequences[trial][index]

    row_keys = [tuple(key_at(row, t) for t in range(count)) for row in rows]
    steps = collapse_repeats(row_keys)
    divergence = next(
        (s for s, step in enumerate(steps) if len(set(row_keys[step.start])) > 1),
        None,
    )
    capped = longest > cap
    return Alignment(
        rows=rows,
        first_divergence=divergence,
        aligned_calls=cap if capped else None,
        aligned_rows=aligned_rows if capped else None,
        steps=steps,
    )


def collapse_repeats(keys: Sequence[tuple[CallKey | None, ...]]) -> list[range]:
    """Runs of consecutive rows whose calls are the same in every trial (each trial repeating
    its own call, or keeping its gap): one step each."""
    steps: list[range] = []
    start = 0
    for r in range(1, len(keys) + 1):
        if r == len(keys) or keys[r] != keys[start]:
            steps.append(range(start, r))
            start = r
    return steps
