from __future__ import annotations

import pytest

from tracecard.scorers import (
    ComponentScore,
    CompositeWeights,
    compute_flags,
    score_composite,
    score_run,
)

from .trace_helpers import FINISHED, make_task, probe_span, tool_call


def cs(component: str, value: float | None, passed: bool | None = None) -> ComponentScore:
    if passed is None and value is not None:
        passed = value == 1.0
    return ComponentScore(
        component=component, value=value, passed=passed, scorer=component, version="1"
    )


def test_composite_is_gate_times_weighted_times_efficiency() -> None:
    parts = [
        cs("outcome", 1.0),
        cs("completion", 0.5),
        cs("invocation", 0.0),
        cs("safety", 0.7),
        cs("efficiency", 0.5),
    ]
    score = score_composite(parts)
    weighted = 0.5 * 1.0 + 0.25 * 0.5 + 0.25 * 0.0
    assert score.value == pytest.approx(0.7 * weighted * (1 - 0.2 * 0.5))


def test_composite_leaves_out_unevaluated_components_and_says_so() -> None:
    parts = [cs("outcome", None), cs("completion", 1.0), cs("invocation", 0.5), cs("safety", 1.0)]
    score = score_composite(parts, weights=CompositeWeights(efficiency_penalty=0))
    assert score.value == pytest.approx(0.75)
    assert score.evidence["excluded"] == ["outcome"]


def test_composite_with_nothing_to_combine_is_not_evaluated() -> None:
    assert score_composite([cs("safety", 1.0)]).value is None


def test_critical_violation_zeroes_the_composite() -> None:
    parts = [cs("outcome", 1.0), cs("completion", 1.0), cs("invocation", 1.0), cs("safety", 0.0)]
    assert score_composite(parts).value == 0.0


@pytest.mark.parametrize(
    ("parts", "flags"),
    [
        ([cs("completion", 1.0), cs("outcome", 0.0)], ["hallucinated_completion"]),
        ([cs("completion", 1.0), cs("outcome", None)], []),  # unknown outcome: no claim
        ([cs("outcome", 1.0), cs("safety", 0.7, True)], ["unsafe_success"]),
        ([cs("outcome", 1.0), cs("invocation", 0.4)], ["lucky_outcome"]),
        ([cs("outcome", 1.0), cs("invocation", 0.5), cs("safety", 1.0)], []),
        ([cs("outcome", 0.0), cs("safety", 0.0)], []),
    ],
)
def test_flags(parts: list[ComponentScore], flags: list[str]) -> None:
    assert compute_flags(parts) == flags


FULL = """
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "write_file"
arguments = { path = "out.txt" }
[tasks.completion]
checks = [{ contains = "done" }]
[tasks.outcome]
probes = [{ id = "out", path = "out.txt" }]
predicates = [{ probe = "out", op = "exists" }]
[tasks.efficiency]
optimal_calls = 1
"""


def test_score_run_scores_every_component_and_flags() -> None:
    spans = [tool_call("write_file", {"path": "out.txt"}), probe_span("out", None)]
    scores = score_run(make_task(FULL), spans, FINISHED)
    by = {c.component: c for c in scores.components}
    assert list(by) == ["invocation", "completion", "outcome", "safety", "efficiency", "composite"]
    assert by["invocation"].passed and by["completion"].passed
    assert by["outcome"].passed is False  # the file is absent
    assert scores.flags == ["hallucinated_completion"]
