"""Completion: the run ended on its own and its final answer passes the task's checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .model import model_answer, model_turns
from .registry import scorer
from .suite import Task
from .types import ComponentScore, RunFacts, Span

__all__ = ["score_completion"]

NAME = "completion"
# 2: no answer from the agent -> the model's last answer (model spans)
# 3: a run that did not end on its own (errored, timed out, aborted) never passes
VERSION = "3"
_NOT_ENDED = ("running", "pending")


def _score(value: float | None, passed: bool | None, evidence: dict[str, Any]) -> ComponentScore:
    return ComponentScore(
        component=NAME, value=value, passed=passed, evidence=evidence, scorer=NAME, version=VERSION
    )


@scorer(name=NAME, component=NAME, version=VERSION)
def score_completion(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    """0 when the run did not end on its own; else the fraction of answer checks that hold
    (with `require_finished = false` a run that did not end on its own keeps that fraction and
    fails)."""
    spec = task.completion
    if spec is None:
        return _score(None, None, {"reason": "task has no completion expectations"})
    if facts.status in _NOT_ENDED:
        return _score(None, None, {"reason": f"run has not ended (status {facts.status})"})
    evidence: dict[str, Any] = {"status": facts.status, "require_finished": spec.require_finished}
    if spec.require_finished and facts.status != "finished":
        evidence["reason"] = f"run did not end on its own (status {facts.status})"
        return _score(0.0, False, evidence)
    answer = facts.final_answer
    if answer is not None:
        evidence["answer_source"] = "agent"
    elif (found := model_answer(model_turns(spans))) is not None:
        answer, evidence["answer_span_id"] = found
        evidence["answer_source"] = "model"  # the agent wrote none: the model's last answer
    results = []
    for check in spec.checks:
        outcome = check.check(answer)
        row: dict[str, Any] = {"check": check.kind, "spec": check.describe(), "passed": outcome.ok}
        if outcome.reason:
            row["reason"] = outcome.reason
        if outcome.note:
            row["note"] = outcome.note
        results.append(row)
    evidence["checks"] = results
    if answer is None and spec.checks:
        evidence["reason"] = "no final answer"
    held = sum(1 for r in results if r["passed"])
    value = held / len(results) if results else 1.0
    if facts.status != "finished":  # require_finished = false: the answer's value, never a pass
        evidence["reason"] = f"run did not end on its own (status {facts.status}): never a pass"
        return _score(value, False, evidence)
    return _score(value, value == 1.0, evidence)
