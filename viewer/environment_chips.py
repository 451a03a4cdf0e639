"""The trace page's chips for a run's environment: answered from a recording (replay) and/or
broken on purpose (a fault plan), read from its experiment's stored `environment`
(docs/replay.md). One query; nothing when the run is not an experiment's or had neither."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracecard.traces import queries
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store


@dataclass(frozen=True)
class EnvironmentChip:
    kind: str  # "replay" | "faults"
    label: str
    title: str  # the longer explanation, on hover
    href: str | None = None


def environment_chips(store: Store, run: RunRow) -> list[EnvironmentChip]:
    """`replayed · tools` (linked to the source experiment) and `faults · seed 7 · 2 rules`."""
    if not run.experiment_id:
        return []
    experiment = queries.get_experiment(store, run.experiment_id)
    environment: dict[str, Any] = (experiment.environment or {}) if experiment else {}
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
                f"a fault plan broke the agent's tool calls on purpose: {', '.join(kinds)}",
            )
        )
    return chips
