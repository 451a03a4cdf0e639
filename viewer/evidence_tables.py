"""The evidence tables' parts (viewer/evidence.py builds them, _macros.html draws them): cells,
rows with ✓/✗ and span links, tables that collapse long passing lists behind a count, and the
builder's base that the component layouts share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from tracecard.scorers.suite import Task
from tracecard.traces.models import ScoreRow
from tracecard.viewer.story import ArgumentsOf

SHOW_PASSING: Final = 4  # passing rows shown before the rest collapse behind a count
CELL_CHARS: Final = 300


@dataclass(frozen=True)
class Cell:
    text: str
    code: bool = True  # monospace (a value), else prose


@dataclass
class Row:
    cells: list[Cell]
    ok: bool | None = None  # ✓, ✗, or neither
    spans: list[str] = field(default_factory=list)
    note: str = ""  # why it failed, differing paths


@dataclass
class Table:
    """One small table: a caption (with its own ✓/✗ and span links), a head, rows."""

    anchor: str  # the element id: `ev-<component>-<n>`, a permalink
    caption: str
    head: tuple[str, ...]
    rows: list[Row] = field(default_factory=list)
    hidden: list[Row] = field(default_factory=list)  # passing rows past SHOW_PASSING
    ok: bool | None = None
    spans: list[str] = field(default_factory=list)
    note: str = ""

    def settle(self) -> Table:
        """Show every failing row; collapse the other rows past the first few behind a count."""
        passing = [r for r in self.rows if r.ok is not False]
        if len(passing) > SHOW_PASSING + 1:
            keep = {id(r) for r in passing[:SHOW_PASSING]}
            self.hidden = [r for r in self.rows if r.ok is not False and id(r) not in keep]
            self.rows = [r for r in self.rows if r.ok is False or id(r) in keep]
        return self


@dataclass
class ComponentEvidence:
    component: str
    facts: list[tuple[str, str]] = field(default_factory=list)  # a one-line summary
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: str = ""


def cut(value: Any) -> str:
    if value is None:
        return "—"
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


class BuilderBase:
    """What every component layout uses: the score, the task, the tables made so far, the
    evidence keys already shown."""

    def __init__(self, score: ScoreRow, task: Task | None, arguments_of: ArgumentsOf) -> None:
        self.score = score
        self.task = task
        self.arguments_of = arguments_of
        self.out = ComponentEvidence(component=score.component)
        self.used: set[str] = set()

    def table(self, caption: str, head: tuple[str, ...], **extra: Any) -> Table:
        table = Table(f"ev-{self.score.component}-{len(self.out.tables)}", caption, head, **extra)
        self.out.tables.append(table)
        return table

    def fact(self, evidence: dict[str, Any], key: str, label: str | None = None) -> None:
        if key in evidence:
            self.used.add(key)
            self.out.facts.append((label or key.replace("_", " "), cut(evidence[key])))
