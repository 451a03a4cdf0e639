"""Outcome: predicates over what the probes observed; reads only verifier spans."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ._json import JsonPath, normalise, normalised_equal
from .calls import probe_observations
from .matchers import MatchResult
from .registry import scorer
from .spec import Predicate
from .suite import Task
from .types import ComponentScore, RunFacts, Span

__all__ = ["evaluate_predicate", "score_outcome"]

NAME = "outcome"
VERSION = "1"


def _contains(expected: Any, actual: Any) -> bool:
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    if isinstance(actual, list):
        return any(normalised_equal(expected, item) for item in actual)
    if isinstance(actual, dict):
        if isinstance(expected, str):
            return expected in actual
        if isinstance(expected, dict):
            norm = normalise(actual)
            return all(k in norm and normalised_equal(v, norm[k]) for k, v in expected.items())
    return False


def evaluate_predicate(predicate: Predicate, observed: Any) -> MatchResult:
    """Whether `predicate` holds on a probe's observed value."""
    found, actual = JsonPath.parse(predicate.path).resolve(observed)
    if predicate.op == "absent":
        ok = not found or actual is None
        return MatchResult(ok=ok, reason="" if ok else f"{predicate.path} is present")
    if predicate.op == "exists":
        ok = found and actual is not None
        return MatchResult(ok=ok, reason="" if ok else f"{predicate.path} does not exist")
    if not found:
        return MatchResult(ok=False, reason=f"{predicate.path} does not exist")
    if predicate.op == "eq":
        ok = normalised_equal(predicate.value, actual)
    elif predicate.op == "approx":
        ok = (
            isinstance(actual, int | float)
            and not isinstance(actual, bool)
            and isinstance(predicate.value, int | float)
            and math.isclose(actual, predicate.value, rel_tol=0.0, abs_tol=predicate.tolerance)
        )
    else:
        ok = _contains(predicate.value, actual)
    return MatchResult(ok=ok, reason="" if ok else f"{predicate.op} {predicate.value!r} failed")


@scorer(name=NAME, component=NAME, version=VERSION)
def score_outcome(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    """Fraction of predicates that hold; None when any probe could not run or is missing."""
    spec = task.outcome
    if spec is None:
        return ComponentScore(
            component=NAME,
            value=None,
            passed=None,
            scorer=NAME,
            version=VERSION,
            evidence={"reason": "task has no outcome expectations"},
        )
    observed = probe_observations(spans)
    not_run: list[dict[str, Any]] = []
    for probe in spec.probes:
        seen = observed.get(probe.id)
        if seen is None:
            not_run.append({"probe": probe.id, "reason": "no verifier span for this probe"})
        elif seen.error is not None:
            not_run.append({"probe": probe.id, "span_id": seen.span_id, "reason": seen.error})
    rows: list[dict[str, Any]] = []
    for predicate in spec.predicates:
        seen = observed.get(predicate.probe)
        row: dict[str, Any] = {
            "probe": predicate.probe,
            "path": predicate.path,
            "op": predicate.op,
            "value": predicate.value,
            "span_id": seen.span_id if seen else None,
        }
        if seen is None or seen.error is not None:
            row["holds"] = None
        else:
            result = evaluate_predicate(predicate, seen.value)
            row["holds"] = result.ok
            found, actual = JsonPath.parse(predicate.path).resolve(seen.value)
            row["observed"] = actual if found else None
            if result.reason:
                row["reason"] = result.reason
        rows.append(row)
    evidence: dict[str, Any] = {"predicates": rows}
    if not_run:
        # "Not evaluated" is never a pass: one missing observation leaves the outcome unknown.
        evidence["not_evaluated"] = not_run
        evidence["reason"] = "probe could not run: " + "; ".join(
            f"{p['probe']}: {p['reason']}" for p in not_run
        )
        return ComponentScore(
            component=NAME,
            value=None,
            passed=None,
            evidence=evidence,
            scorer=NAME,
            version=VERSION,
        )
    held = sum(1 for r in rows if r["holds"])
    value = held / len(rows)
    return ComponentScore(
        component=NAME,
        value=value,
        passed=held == len(rows),
        evidence=evidence,
        scorer=NAME,
        version=VERSION,
    )
