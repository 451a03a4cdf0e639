"""Each package's public surface, exactly (in the style of httpx's `test_exported_members.py`).

A name added to or dropped from a package's `__all__` is a change of its public API: this test
makes it a deliberate one. Update EXPECTED in the same commit, and the docs with it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

EXPECTED: dict[str, set[str]] = {
    "tracecard": {"AsyncTracecardClient", "TracecardClient", "TracecardError", "__version__"},
    "tracecard.server": {"Settings", "create_app", "load_settings"},
    "tracecard.viewer": {
        "Alignment",
        "CSP",
        "SECURITY_HEADERS",
        "TraceView",
        "align_calls",
        "build_trace",
        "SchemaPage",
        "htmx_path",
        "schema_router",
        "viewer_router",
    },
    "tracecard.scorers": {
        "CURRENT_SCHEMA_VERSION",
        "Comparison",
        "Check",
        "ComparisonError",
        "ComponentScore",
        "CompositeWeights",
        "ENTRY_POINT_GROUP",
        "FINAL_STATUSES",
        "GateConstants",
        "GateResult",
        "Interval",
        "RUN_STATUSES",
        "STATISTICS",
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
    },
    "tracecard.traces": {
        "ExperimentRow",
        "RunRow",
        "ScoreRow",
        "SpanDict",
        "SpanRow",
        "SqlSpanExporter",
        "Store",
        "StoredExperiment",
        "SuiteRow",
        "VerdictRow",
        "default_db_url",
        "encode_otlp_json",
        "make_engine",
        "normalise_url",
        "readable_to_dict",
        "span_row_to_dict",
        "stored_experiment",
    },
    "tracecard.server.audit": {
        "BuiltinAgentError",
        "builtin_argv",
        "builtin_command",
        "is_builtin",
    },
    "tracecard.server.cli": {"build_parser", "main"},
    "tracecard.server.jobs": {
        "Cell",
        "JobOrchestrator",
        "cell_workflow_id",
        "run_cell",
        "system_database_url",
    },
    "tracecard.server.orchestration": {
        "AgentOutcome",
        "AgentRunner",
        "CommandAgent",
        "ProcessResult",
        "PythonAgent",
        "TailBuffer",
        "agent_environment",
        "embedded_server",
        "free_port",
        "group_members",
        "run_process",
        "upstream_variable",
    },
    "tracecard.server.mrtr": {"LogicalCalls", "install_mrtr", "mrtr_lifespan"},
    "tracecard.server.proxy": {"ProxyRouter", "ProxyState", "match", "proxy_lifespan"},
    "tracecard.server.stdio": {
        "StdioBridge",
        "StdioProcess",
        "StdioUpstreams",
        "UpstreamError",
        "stdio_lifespan",
    },
}


def _own_public_members(module: ModuleType) -> set[str]:
    """Public classes and functions bound in the package's namespace that come from tracecard
    itself (not submodules, not the third-party names its `__init__` uses; constants carry no
    home module and are checked by the exact test)."""
    found = set()
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, ModuleType):
            continue
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith("tracecard"):
            found.add(name)
    return found


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_public_surface_is_exactly_the_expected_one(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{package}.__all__ names something twice"
    assert set(exported) == EXPECTED[package]
    for name in exported:
        member = getattr(module, name)
        if callable(member) and not name.endswith("Dict"):  # classes and functions say what
            assert member.__doc__, f"{package}.{name} has no docstring"


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_every_public_member_is_exported(package: str) -> None:
    """What a package binds publicly at import is its surface: nothing public hides outside
    `__all__` (lazy packages bind nothing until asked)."""
    module = importlib.import_module(package)
    assert _own_public_members(module) <= set(module.__all__)
