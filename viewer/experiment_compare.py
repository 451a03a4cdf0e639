"""Two experiments compared on every component at once, for the compare-experiments page.

Every number is the scorers': each component's per-task pass rates, classes and verdict come
from `scorers.compare_experiments` (the paired comparison the CLI and the API use), flags from
the scorecards' run records. This module only arranges them: one row per task with every
component's A and B side by side, the flags each side raised on the task, regressions first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tracecard.scorers.compare import CLASS_ORDER, Comparison, compare_experiments
from tracecard.scorers.scorecard import Scorecard
from tracecard.scorers.types import ComponentScore

ORDER_OF: dict[str, int] = {name: index for index, name in enumerate(CLASS_ORDER)}


@dataclass(frozen=True)
class Cell:
    """One task x component: A's and B's pass rate and the scorers' class."""

    a: float | None
    b: float | None
    cls: str


@dataclass(frozen=True)
class FlagCount:
    """How many runs of a task raised a flag in A and in B."""

    flag: str
    a: int
    b: int

    @property
    def worse(self) -> bool:
        """B raised it more often than A."""
        return self.b > self.a


@dataclass
class TaskRow:
    """One task: each component's cell (in `ExperimentsComparison.components` order) and
    the flags either side raised on it."""

    task_id: str
    cells: list[Cell | None]
    flags: list[FlagCount] = field(default_factory=list)
    runs_a: int = 0
    runs_b: int = 0

    @property
    def worst(self) -> int:
        """The most urgent class among its cells (CLASS_ORDER index): regressions first."""
        return min((ORDER_OF[c.cls] for c in self.cells if c is not None), default=len(ORDER_OF))

    @property
    def flagged_worse(self) -> bool:
        """B raised some flag more often than A (a task that may pass in both on outcome)."""
        return any(f.worse for f in self.flags)


@dataclass
class ExperimentsComparison:
    """What the page draws: the components, one comparison per component, the task rows."""

    headline: Comparison  # the chosen component's comparison: the verdict box and the chart
    components: list[str]
    comparisons: list[Comparison]
    tasks: list[TaskRow]

    def counts(self) -> dict[str, int]:
        """Tasks per class of the headline component (the scorers' counts)."""
        return self.headline.counts()


def _flags_by_task(card: Scorecard) -> dict[str, Counter[str]]:
    flags: dict[str, Counter[str]] = {}
    for run in card.runs:
        flags.setdefault(run.task_id, Counter()).update(run.flags)
    return flags


def _runs_by_task(card: Scorecard) -> Counter[str]:
    return Counter(run.task_id for run in card.runs)


def _components(a: Scorecard, b: Scorecard, headline: str) -> list[str]:
    """Every component either side scored, in the scorecards' order; the headline first."""
    names: list[str] = []
    for card in (a, b):
        names += [s.component for s in card.components if s.component not in names]
    return names if headline in names else [headline, *names]


def _has_pass(card: Scorecard, component: str) -> bool:
    """Whether the component gives pass/fail (the composite only a value): compared by rate."""
    return any(s.passed is not None for r in card.runs for s in _scores(r.components, component))


def _scores(scores: Sequence[ComponentScore], component: str) -> list[ComponentScore]:
    return [s for s in scores if s.component == component]


def compare_all(a: Scorecard, b: Scorecard, headline: str = "outcome") -> ExperimentsComparison:
    """B against A on every component both scorecards have (raises `ComparisonError` when
    they ran different suites), tasks with a regression in any component first."""
    components = [
        name
        for name in _components(a, b, headline)
        if name == headline or _has_pass(a, name) or _has_pass(b, name)
    ]
    comparisons = [compare_experiments(a, b, name) for name in components]
    headline_comparison = comparisons[components.index(headline)]
    cells: dict[str, list[Cell | None]] = {}
    order: list[str] = []
    for index, comparison in enumerate(comparisons):
        for task in comparison.tasks:
            if task.task_id not in cells:
                cells[task.task_id] = [None] * len(comparisons)
                order.append(task.task_id)
            cells[task.task_id][index] = Cell(task.a, task.b, task.cls)
    flags_a, flags_b = _flags_by_task(a), _flags_by_task(b)
    runs_a, runs_b = _runs_by_task(a), _runs_by_task(b)
    rows = []
    for task_id in order:
        mine, theirs = flags_a.get(task_id, Counter()), flags_b.get(task_id, Counter())
        flags = [
            FlagCount(name, mine[name], theirs[name]) for name in sorted(set(mine) | set(theirs))
        ]
        rows.append(TaskRow(task_id, cells[task_id], flags, runs_a[task_id], runs_b[task_id]))
    # the headline's display order (the scorers'), then worst class over every component first,
    # then a task whose B raised more flags: "both pass" on outcome with unsafe successes
    headline_order = {t.task_id: i for i, t in enumerate(headline_comparison.tasks)}
    rows.sort(key=lambda r: (r.worst, not r.flagged_worse, headline_order.get(r.task_id, 0)))
    return ExperimentsComparison(headline_comparison, components, comparisons, rows)
