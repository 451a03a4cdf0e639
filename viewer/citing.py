"""A span's detail: the evidence that cites it, as the same expected-vs-observed tables the
evidence panel shows (`tracecard.viewer.evidence`), narrowed to the rows about this span."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from tracecard.scorers.suite import Task
from tracecard.traces.models import ScoreRow
from tracecard.viewer.evidence import Table, component_evidence
from tracecard.viewer.story import ArgumentsOf
from tracecard.viewer.trace_view import EvidenceItem, evidence_items

__all__ = ["Citation", "citations"]


@dataclass(frozen=True)
class Citation:
    """One score's evidence about a span: its tables (whole when the table is about the span,
    else only its rows that cite it), and what cites the span outside any table (raw)."""

    score: ScoreRow
    tables: list[Table]
    loose: list[EvidenceItem]


def _about(table: Table, span_id: str) -> Table | None:
    if span_id in table.spans:
        return table
    rows = [r for r in (*table.rows, *table.hidden) if span_id in r.spans]
    return replace(table, rows=rows, hidden=[]) if rows else None


def citations(
    span_id: str, scores: Iterable[ScoreRow], task: Task | None, arguments_of: ArgumentsOf
) -> list[Citation]:
    """Per score that cites `span_id` anywhere in its evidence, what it says about the span."""
    found = []
    for score in scores:
        items = [i for i in evidence_items(score) if span_id in i.span_ids]
        if not items:
            continue
        view = component_evidence(score, task, arguments_of)
        tables = [t for t in (_about(t, span_id) for t in view.tables) if t is not None]
        found.append(Citation(score, tables, [] if tables else items))
    return found
