"""People's verdicts beside the evaluator's scores, and how often they agree (per scorer)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, select

from tracecard.traces.models import RunRow, ScoreRow, VerdictRow
from tracecard.traces.store import Store

__all__ = ["Agreement", "add_verdict", "agreement_rates", "verdicts_for_runs"]


@dataclass(frozen=True)
class Agreement:
    """How often people agreed with one scorer: `agree` of `n` verdicts."""

    scorer: str
    n: int
    agree: int

    @property
    def rate(self) -> float:
        """Share of verdicts that agree with the scorer."""
        return self.agree / self.n if self.n else 0.0


def verdicts_for_runs(store: Store, run_ids: Iterable[str]) -> dict[str, list[VerdictRow]]:
    """Every verdict on these runs, oldest first, by run id."""
    ids = list(dict.fromkeys(run_ids))
    by_run: dict[str, list[VerdictRow]] = defaultdict(list)
    if not ids:
        return by_run
    verdicts: Any = VerdictRow
    with store.session() as session:
        for start in range(0, len(ids), 500):
            query = (
                select(VerdictRow)
                .where(verdicts.run_id.in_(ids[start : start + 500]))
                .order_by(verdicts.created_at, verdicts.id)
            )
            for row in session.scalars(query):
                by_run[row.run_id].append(row)
    return by_run


def add_verdict(
    store: Store,
    run_id: str,
    component: str,
    agree: bool,
    note: str | None = None,
    author: str | None = None,
) -> VerdictRow:
    """Store a person's verdict on one component of a run (the viewer and the API call this)."""
    if store.get_run(run_id) is None:
        raise KeyError(f"no run with id {run_id!r}")
    verdict = VerdictRow(
        run_id=run_id,
        component=component,
        agree=agree,
        note=(note or None),
        author=(author or None),
    )
    with store.writing() as session:
        session.add(verdict)
    return verdict


def agreement_rates(store: Store, experiment_id: str | None = None) -> list[Agreement]:
    """Per scorer, the share of verdicts that agree, over one experiment or over everything."""
    verdicts: Any = VerdictRow
    scores: Any = ScoreRow
    runs: Any = RunRow
    query = (
        select(scores.scorer, verdicts.agree, func.count())
        .select_from(VerdictRow)
        .join(
            ScoreRow,
            and_(scores.run_id == verdicts.run_id, scores.component == verdicts.component),
        )
        .group_by(scores.scorer, verdicts.agree)
    )
    if experiment_id is not None:
        query = query.join(RunRow, runs.id == verdicts.run_id).where(
            runs.experiment_id == experiment_id
        )
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    with store.session() as session:
        for scorer, agree, count in session.execute(query):
            tally[str(scorer)][0] += int(count)
            if agree:
                tally[str(scorer)][1] += int(count)
    return [Agreement(scorer=s, n=n, agree=a) for s, (n, a) in sorted(tally.items())]
