"""The chips for a run's environment, on the trace page and the runs list: answered from a
recording (replay) and/or broken on purpose (a fault plan), read from its experiment's stored
`environment` (docs/replay.md). One query (a page of runs: one for all their experiments);
nothing when the run is not an experiment's or had neither."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import select

from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow
from tracecard.traces.store import Store


@dataclass(frozen=True)
class EnvironmentChip:
    kind: str  # "replay" | "faults"
    label: str
    title: str  # the longer explanation, on hover
    href: str | None = None

    @property
    def short(self) -> str:
        """The runs list's narrower label (`faults`; the seed and rules are in the title)."""
        return "faults" if self.kind == "faults" else self.label


def environment_chips(store: Store, run: RunRow) -> list[EnvironmentChip]:
    """`replayed · tools` (linked to the source experiment) and `faults · seed 7 · 2 rules`."""
    if not run.experiment_id:
        return []
    experiment = queries.get_experiment(store, run.experiment_id)
    return _chips((experiment.environment or {}) if experiment else {})


def chips_by_run(store: Store, runs: Sequence[RunRow]) -> dict[str, list[EnvironmentChip]]:
    """The chips of a page of runs, by run id (only the runs that have some)."""
    wanted = {r.experiment_id for r in runs if r.experiment_id}
    if not wanted:
        return {}
    table: Any = ExperimentRow
    query = select(table.id, table.environment).where(table.id.in_(sorted(wanted)))
    with store.session() as session:
        found = {row[0]: _chips(row[1] or {}) for row in session.execute(query)}
    return {r.id: found[r.experiment_id] for r in runs if found.get(r.experiment_id or "")}


def _chips(environment: dict[str, Any]) -> list[EnvironmentChip]:
    chips = []
    replay = environment.get("replay")
    if isinstance(replay, dict):
        source = str(replay.get("source") or "")
        mode = str(replay.get("mode") or "tools")
        live = {"tools": "the model live", "model": "the tools live", "all": "nothing live"}
        chips.append(
            EnvironmentChip(
                "replay",
                f"replayed · {mode}",
                f"answers from experiment {source}'s recording ({live.get(mode, mode)}); "
                f"a miss goes {'live' if replay.get('on_miss') == 'live' else 'to an error'}",
                f"/experiments/{source}" if source else None,
            )
        )
    faults = environment.get("faults")
    if isinstance(faults, dict):
        found = faults.get("rules")
        rules: list[Any] = found if isinstance(found, list) else []
        kinds = sorted({str(r.get("kind")) for r in rules if isinstance(r, dict)})
        count = len(rules)
        chips.append(
            EnvironmentChip(
                "faults",
                f"faults · seed {faults.get('seed')} · {count} rule{'s' if count != 1 else ''}",
                f"a fault plan (seed {faults.get('seed')}) broke the agent's tool calls on "
                f"purpose: {', '.join(kinds)}",
            )
        )
    return chips
