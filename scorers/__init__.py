"""Task specs and pure scoring: (task, stored trace, run facts) -> component scores.

Nothing here does I/O or imports Litestar, the server or the viewer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import Comparison, ComparisonError, TaskComparison, compare_experiments
    from .completion import score_completion
    from .composite import score_composite
    from .efficiency import score_efficiency
    from .flags import compute_flags, score_run
    from .gates import Check, GateResult, Threshold, gate
    from .invocation import score_invocation
    from .outcome import evaluate_predicate, score_outcome
    from .registry import (
        ENTRY_POINT_GROUP,
        RegistryError,
        ScorerInfo,
        ScorerRegistry,
        check_component,
        component_key,
        component_names,
        default_registry,
        load_entry_points,
        load_scorer_module,
        scorer,
    )
    from .repeats import Interval, bootstrap_mean, bootstrap_means, flip_rate, pass_at_k, pass_hat_k
    from .safety import Violation, check_call, gate_value, score_safety
    from .scorecard import (
        RunRecord,
        Scorecard,
        Statistic,
        Verdict,
        build_scorecard,
    )
    from .scoring import CompositeWeights, GateConstants, Scoring
    from .statistics import STATISTICS, StatisticName, UnknownStatistic, parse_statistic
    from .stored import scorecard_of
    from .suite import (
        CURRENT_SCHEMA_VERSION,
        Suite,
        SuiteError,
        Task,
        load_suite,
        parse_suite,
        suite_version,
    )
    from .suite_text import dump_suite
    from .types import FINAL_STATUSES, RUN_STATUSES, ComponentScore, RunFacts, RunScores
    from .writers import (
        ScorecardFormatError,
        read_scorecard_json,
        to_csv,
        to_json,
        to_junit,
        to_markdown,
    )

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "ENTRY_POINT_GROUP",
    "FINAL_STATUSES",
    "RUN_STATUSES",
    "STATISTICS",
    "Check",
    "Comparison",
    "ComparisonError",
    "ComponentScore",
    "CompositeWeights",
    "GateConstants",
    "GateResult",
    "Interval",
    "RegistryError",
    "RunFacts",
    "RunRecord",
    "RunScores",
    "Scorecard",
    "ScorecardFormatError",
    "ScorerInfo",
    "ScorerRegistry",
    "Scoring",
    "Statistic",
    "StatisticName",
    "Suite",
    "SuiteError",
    "Task",
    "TaskComparison",
    "Threshold",
    "UnknownStatistic",
    "Verdict",
    "Violation",
    "bootstrap_mean",
    "bootstrap_means",
    "build_scorecard",
    "check_call",
    "check_component",
    "compare_experiments",
    "component_key",
    "component_names",
    "compute_flags",
    "default_registry",
    "dump_suite",
    "evaluate_predicate",
    "flip_rate",
    "gate",
    "gate_value",
    "load_entry_points",
    "load_scorer_module",
    "load_suite",
    "parse_statistic",
    "parse_suite",
    "pass_at_k",
    "pass_hat_k",
    "read_scorecard_json",
    "score_completion",
    "score_composite",
    "score_efficiency",
    "score_invocation",
    "score_outcome",
    "score_run",
    "score_safety",
    "scorecard_of",
    "scorer",
    "suite_version",
    "to_csv",
    "to_json",
    "to_junit",
    "to_markdown",
]

# Each public name's home module, imported on first use (PEP 562): `tracecard gate` reads a stored
# scorecard and should not pay for the comparison, the writers or every scorer to do so.
_HOMES: dict[str, str] = {
    "CURRENT_SCHEMA_VERSION": "suite",
    "ENTRY_POINT_GROUP": "registry",
    "FINAL_STATUSES": "types",
    "RUN_STATUSES": "types",
    "STATISTICS": "statistics",
    "Check": "gates",
    "Comparison": "compare",
    "ComparisonError": "compare",
    "ComponentScore": "types",
    "CompositeWeights": "scoring",
    "GateConstants": "scoring",
    "GateResult": "gates",
    "Interval": "repeats",
    "RegistryError": "registry",
    "RunFacts": "types",
    "RunRecord": "scorecard",
    "RunScores": "types",
    "Scorecard": "scorecard",
    "ScorecardFormatError": "writers",
    "ScorerInfo": "registry",
    "ScorerRegistry": "registry",
    "Scoring": "scoring",
    "Statistic": "scorecard",
    "StatisticName": "statistics",
    "Suite": "suite",
    "SuiteError": "suite",
    "Task": "suite",
    "TaskComparison": "compare",
    "Threshold": "gates",
    "UnknownStatistic": "statistics",
    "Verdict": "scorecard",
    "Violation": "safety",
    "bootstrap_mean": "repeats",
    "bootstrap_means": "repeats",
    "build_scorecard": "scorecard",
    "check_call": "safety",
    "check_component": "registry",
    "compare_experiments": "compare",
    "component_key": "registry",
    "component_names": "registry",
    "compute_flags": "flags",
    "default_registry": "registry",
    "dump_suite": "suite_text",
    "evaluate_predicate": "outcome",
    "flip_rate": "repeats",
    "gate": "gates",
    "gate_value": "safety",
    "load_entry_points": "registry",
    "load_scorer_module": "registry",
    "load_suite": "suite",
    "parse_statistic": "statistics",
    "parse_suite": "suite",
    "pass_at_k": "repeats",
    "pass_hat_k": "repeats",
    "read_scorecard_json": "writers",
    "score_completion": "completion",
    "score_composite": "composite",
    "score_efficiency": "efficiency",
    "score_invocation": "invocation",
    "score_outcome": "outcome",
    "score_run": "flags",
    "score_safety": "safety",
    "scorecard_of": "stored",
    "scorer": "registry",
    "suite_version": "suite",
    "to_csv": "writers",
    "to_json": "writers",
    "to_junit": "writers",
    "to_markdown": "writers",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # (found directly from now on)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
