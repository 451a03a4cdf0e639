"""Fault plans: seeded rules that break upstream answers on purpose, on agent traffic only.

Public surface: `FaultPlan` / `FaultRule` (the plan, as stored and as read from TOML by
`read_plan`), `RunFaults` and `run_faults` (one run's seeded state, checked on the hot path),
`check_faults` (a plan against the server's upstreams). Applied by the trial environment
(tracecard.server.replay.environment). See docs/replay.md, "Fault plans".
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracecard.server.faults.check import check_faults
    from tracecard.server.faults.plan import (
        FaultPlan,
        FaultRule,
        RunFaults,
        read_plan,
        run_faults,
    )

__all__ = ["FaultPlan", "FaultRule", "RunFaults", "check_faults", "read_plan", "run_faults"]

# Each name is imported from its home on first use (PEP 562): `check` needs the runtime (aiohttp,
# OpenTelemetry), which `tracecard export` must not load to read `faults.robustness`.
_PLAN = ("FaultPlan", "FaultRule", "RunFaults", "read_plan", "run_faults")
_HOMES = {"check_faults": "check", **dict.fromkeys(_PLAN, "plan")}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
