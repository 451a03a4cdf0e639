"""Process / efficiency: calls vs optimal, redundant calls, tool errors and recovery, latency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._json import canonical_json
from .calls import ToolCall, agent_calls
from .model import ModelUsage, model_turns
from .registry import scorer
from .suite import Task
from .types import ComponentScore, RunFacts, Span

__all__ = ["call_identity", "executes_calls", "expects_no_calls", "score_efficiency"]

NAME = "efficiency"
# 2: model turns, tokens and model latency (and their budgets); 3: failed model requests are
# `model_errors`, not turns, and unreported usage is unknown (None), not 0
# 4: a run without tool calls is not evaluated, unless the task expects none (then 1.0)
VERSION = "4"


def expects_no_calls(task: Task) -> bool:
    """The task asks for no tool call (abstention, or an optimal count of 0)."""
    spec = task.invocation
    return (spec is not None and spec.expect_no_calls) or task.efficiency.optimal_calls == 0


def executes_calls(task: Task) -> bool:
    # tasks that check the model's requested calls (BFCL's) execute none: calls are not counted
    return task.invocation is None or task.invocation.source == "tools"


def call_identity(call: ToolCall) -> str:
    """Canonical tool + upstream + arguments: equal identities are redundant repeats."""
    arguments = call.arguments if call.arguments is not None else call.raw_arguments
    return canonical_json([call.upstream, call.tool, arguments])


def _recovered(calls: Sequence[ToolCall], index: int) -> bool:
    # Recovered: a later call to the same tool succeeded.
    failed = calls[index]
    return any(c.tool == failed.tool and not c.is_error for c in calls[index + 1 :])


@scorer(name=NAME, component=NAME, version=VERSION)
def score_efficiency(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    """Product of call economy, non-redundancy, error handling and (optionally) latency; not
    evaluated for a run without tool calls unless the task expects none (then 1.0)."""
    spec = task.efficiency
    calls = agent_calls(spans)
    n = len(calls)
    seen: dict[str, str] = {}
    redundant: list[dict[str, str]] = []
    for call in calls:
        identity = call_identity(call)
        if identity in seen and not call.is_error:
            redundant.append({"span_id": call.span_id, "repeats": seen[identity]})
        # A retry after an error is not waste; only repeats of a successful call are.
        if not call.is_error:
            seen.setdefault(identity, call.span_id)
    errors = [i for i, c in enumerate(calls) if c.is_error]
    recovered = [i for i in errors if _recovered(calls, i)]
    latency_ms = sum(c.latency_ms for c in calls)

    parts: dict[str, float] = {}
    if spec.optimal_calls is not None:
        parts["call_economy"] = 1.0 if n <= spec.optimal_calls else spec.optimal_calls / n
    parts["non_redundant"] = 1.0 - len(redundant) / n if n else 1.0
    # A recovered error costs half as much as one left unrecovered.
    parts["error_handling"] = 1.0 - (len(errors) - 0.5 * len(recovered)) / n if n else 1.0
    if spec.max_latency_ms is not None:
        parts["latency"] = min(1.0, spec.max_latency_ms / latency_ms) if latency_ms else 1.0
    usage = ModelUsage.of(model_turns(spans))
    model_latency_ms = usage.latency_ms
    for key, budget, used in (
        ("token_budget", spec.max_tokens, usage.tokens),
        ("model_turns", spec.max_model_turns, usage.turns),
        ("model_latency", spec.max_model_latency_ms, model_latency_ms),
    ):
        if budget is not None:
            parts[key] = min(1.0, budget / used) if used else 1.0
    value = 1.0
    for part in parts.values():
        value *= part
    evidence: dict[str, Any] = {
        "calls": n,
        "optimal_calls": spec.optimal_calls,
        "redundant": redundant,
        "errors": [
            {
                "span_id": calls[i].span_id,
                "error_type": calls[i].error_type,
                "recovered": i in recovered,
            }
            for i in errors
        ],
        "latency_ms": round(latency_ms, 3),
        "model_turns": usage.turns,  # answered requests; failed ones are `model_errors`
        "model_errors": usage.errors,
        "input_tokens": usage.input_tokens,  # None: no request reported usage (unknown, not 0)
        "output_tokens": usage.output_tokens,
        "usage_unknown": usage.usage_unknown,
        "model_latency_ms": round(model_latency_ms, 3),
        "parts": {k: round(v, 6) for k, v in parts.items()},
    }
    result: float | None = value
    passed: bool | None = value >= spec.pass_threshold
    if n == 0 and executes_calls(task) and not expects_no_calls(task):
        # Doing nothing is not efficient: with no call there is no efficiency to measure.
        evidence["reason"] = (
            "no tool calls: efficiency is not evaluated for a run that did nothing (the task "
            "expects calls)"
        )
        result, passed = None, None
    return ComponentScore(
        component=NAME,
        value=result,
        passed=passed,
        evidence=evidence,
        scorer=NAME,
        version=VERSION,
    )
