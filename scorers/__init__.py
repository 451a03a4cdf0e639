"""Task specs and pure scoring: (task, stored trace, run facts) -> component scores.

Nothing here does I/O or imports Litestar, the server or the viewer.
"""

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
