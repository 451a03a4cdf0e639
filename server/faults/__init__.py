"""Fault plans: seeded rules that break upstream answers on purpose, on agent traffic only.

Public surface: `FaultPlan` / `FaultRule` (the plan, as stored and as read from TOML by
`read_plan`), `RunFaults` and `run_faults` (one run's seeded state, checked on the hot path),
`check_faults` (a plan against the server's upstreams). Applied by the trial environment
(tracecard.server.replay.environment). See docs/replay.md, "Fault plans".
"""

from __future__ import annotations

from tracecard.server.faults.check import check_faults
from tracecard.server.faults.plan import FaultPlan, FaultRule, RunFaults, read_plan, run_faults

__all__ = ["FaultPlan", "FaultRule", "RunFaults", "check_faults", "read_plan", "run_faults"]
