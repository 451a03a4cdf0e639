"""Replay: an experiment takes its upstreams' answers from a source experiment's recording.

Public surface: `ReplayPlan` (what to replay, how to match), `install` (the hook on the
runtime), `check_replay` / `start_replay` (experiment creation), `TrialEnvironment` (the hot
path's view), `RunReplay` (one run's index). See docs/replay.md.
"""

from __future__ import annotations

from tracecard.server.replay.environment import TrialEnvironment
from tracecard.server.replay.feature import (
    PreparedReplay,
    check_replay,
    install,
    replay_lifespan,
    start_faults,
    start_replay,
)
from tracecard.server.replay.index import RunReplay
from tracecard.server.replay.plan import ReplayPlan, UpstreamReplay

__all__ = [
    "PreparedReplay",
    "ReplayPlan",
    "RunReplay",
    "TrialEnvironment",
    "UpstreamReplay",
    "check_replay",
    "install",
    "replay_lifespan",
    "start_faults",
    "start_replay",
]
