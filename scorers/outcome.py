"""Outcome: predicates over what the probes observed; reads only verifier spans."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from ._json import JsonPath, normalise, normalised_equal
from .calls import ProbeObservation, agent_calls, probe_observations
from .efficiency import executes_calls, expects_no_calls
from .equality import python_equal
from .matchers import MatchResult, not_evaluated
from .redacted import (
    CANNOT_COMPARE,
    NotComparable,
    equal,
    fingerprinting,
    is_fingerprint,
    masked,
)
from .registry import scorer
from .spec import OutcomeSpec, Predicate
from .suite import Task
from .turns import turn_spans
from .types import ComponentScore, RunFacts, Span

__all__ = ["differences", "evaluate_outcome", "evaluate_predicate", "score_outcome"]

NAME = "outcome"
# 2: per-turn outcomes; differing fields of a failed `eq` in the evidence
# 3: fingerprints of redacted values compared by `eq`; other ops on them not evaluated; strict
# 4: `normalize = "python"` on `eq` (Python's ==, tagged maps, sets and tuples)
# 5: a run without tool calls earns no partial credit (its predicates that hold are `unchanged`:
#    the state it found); one that errored, timed out or was aborted before its first call is 0
VERSION = "5"
_ENDED_BADLY = ("errored", "timed_out", "aborted")


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
    if is_fingerprint(actual) and predicate.op != "eq":
        return not_evaluated(f"{predicate.path} " + CANNOT_COMPARE.format(kind=predicate.op))
    if predicate.op == "eq" and predicate.normalize == "python" and not is_fingerprint(actual):
        ok = python_equal(predicate.value, actual)
    elif predicate.op == "eq":
        try:
            ok = equal(predicate.value, actual, predicate.strict)
        except NotComparable as exc:
            return not_evaluated(str(exc))
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


def differences(
    expected: Any, actual: Any, path: str = "$", limit: int = 20, python: bool = False
) -> list[str]:
    """JSON paths at which `actual` differs from `expected` (at most `limit`), for evidence
    (`python`: leaves compared as Python's ==)."""
    out: list[str] = []
    same = python_equal if python else normalised_equal

    def walk(exp: Any, act: Any, where: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(exp, dict) and isinstance(act, dict):
            for key in list(exp) + [k for k in act if k not in exp]:
                step = (
                    f"{where}.{key}"
                    if re.fullmatch(r"[A-Za-z_][\w]*", str(key))
                    else (f"{where}[{json.dumps(str(key))}]")
                )
                if key not in act or key not in exp:
                    out.append(step)
                else:
                    walk(exp[key], act[key], step)
        elif isinstance(exp, list) and isinstance(act, list) and len(exp) == len(act):
            for index, (e, a) in enumerate(zip(exp, act, strict=True)):
                walk(e, a, f"{where}[{index}]")
        elif not same(exp, act):
            out.append(where)

    walk(expected, actual, path)
    return out


def evaluate_outcome(
    spec: OutcomeSpec, observed: dict[str, ProbeObservation]
) -> tuple[float | None, bool | None, dict[str, Any]]:
    """(value, passed, evidence) of one outcome spec on the probes' observations."""
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
            row["holds"] = result.ok if result.evaluated else None
            if not result.evaluated:
                row["not_evaluated"] = True
            found, actual = JsonPath.parse(predicate.path).resolve(seen.value)
            row["observed"] = actual if found else None
            if found and is_fingerprint(actual):  # the evidence holds no secret in clear
                row["value"] = masked(predicate.value)
            if result.reason:
                row["reason"] = result.reason
            if not result.ok and predicate.op == "eq" and found:
                # which fields of a reference state differ, not only that it differs
                python = predicate.normalize == "python"
                where = predicate.path
                row["differing"] = differences(predicate.value, actual, where, python=python)
        rows.append(row)
    evidence: dict[str, Any] = {"predicates": rows}
    unjudged = [r for r in rows if r.get("not_evaluated")]
    if unjudged and not not_run:
        evidence["reason"] = "; ".join(f"{r['probe']} {r['path']}: {r['reason']}" for r in unjudged)
        return None, None, evidence
    if not_run:
        # "Not evaluated" is never a pass: one missing observation leaves the outcome unknown.
        evidence["not_evaluated"] = not_run
        evidence["reason"] = "probe could not run: " + "; ".join(
            f"{p['probe']}: {p['reason']}" for p in not_run
        )
        return None, None, evidence
    held = sum(1 for r in rows if r["holds"])
    return held / len(rows), held == len(rows), evidence


def _score(value: float | None, passed: bool | None, evidence: dict[str, Any]) -> ComponentScore:
    return ComponentScore(
        component=NAME, value=value, passed=passed, evidence=evidence, scorer=NAME, version=VERSION
    )


def _score_turns(task: Task, spans: Sequence[Span]) -> ComponentScore:
    # Per turn: that turn's probes (run at its boundary) against its predicates. The run's value
    # is the mean over turns with an outcome; it passes when every such turn passes; a turn that
    # was reached but could not be probed leaves the run not evaluated; a turn never reached fails.
    reached = turn_spans(spans)
    rows: list[dict[str, Any]] = []
    for index, turn in enumerate(task.turns):
        if turn.outcome is None:
            continue
        if index not in reached:
            rows.append(
                {"turn": index, "value": 0.0, "passed": False, "reason": "turn not reached"}
            )
            continue
        value, passed, evidence = evaluate_outcome(turn.outcome, probe_observations(spans, index))
        rows.append({"turn": index, "value": value, "passed": passed} | evidence)
    evidence = {"mode": "per_turn", "turns": rows}
    if any(r["value"] is None for r in rows):
        unknown = [r["turn"] for r in rows if r["value"] is None]
        evidence["reason"] = f"turn(s) {unknown} could not be probed"
        return _score(None, None, evidence)
    value = sum(r["value"] for r in rows) / len(rows)
    return _score(value, all(r["passed"] for r in rows), evidence)


def _did_nothing(
    value: float | None, passed: bool | None, evidence: dict[str, Any], status: str, task: Task
) -> ComponentScore:
    """A run without tool calls: the state the probes saw is the one it started from. Its
    holding predicates are marked `unchanged`; no partial credit (1 only when every predicate
    holds: a task whose goal is to leave things alone); 0 when it ended badly, or when the
    task expects calls and the state could not be read (a per-run server never started)."""
    for row in evidence.get("predicates", []):
        if row.get("holds"):
            row["unchanged"] = True
    if status in _ENDED_BADLY:
        evidence["reason"] = (
            f"the run {status.replace('_', ' ')} before its first call: outcome 0 (no credit for "
            "the state it found)"
        )
        return _score(0.0, False, evidence)
    if value is None:
        # 0 only when a probe never ran (no verifier span: nothing was there to read); a probe
        # that ran and failed (an unknown tool, a 5xx, a path outside the sandbox) is a defect of
        # the suite or the tool, not the agent's, and leaves the outcome not evaluated
        never_ran = [p for p in evidence.get("not_evaluated", []) if "span_id" not in p]
        if expects_no_calls(task) or not never_ran or len(never_ran) < len(
            evidence["not_evaluated"]
        ):
            return _score(value, passed, evidence)
        evidence["reason"] = (
            "no tool calls, and the state could not be read (" + evidence["reason"] + "): "
            "outcome 0 for a run that did nothing"
        )
        return _score(0.0, False, evidence)
    if not passed:
        held = sum(1 for row in evidence.get("predicates", []) if row.get("holds"))
        evidence["reason"] = (
            f"no tool calls: the {held} predicate(s) that hold held in the start state "
            "(unchanged); no partial credit"
        )
        return _score(0.0, False, evidence)
    return _score(value, passed, evidence)


@scorer(name=NAME, component=NAME, version=VERSION)
def score_outcome(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    """Fraction of predicates that hold; None when any probe could not run or is missing. For a
    multi-turn task with per-turn outcomes, per turn (see `_score_turns`). A run without tool
    calls gets no partial credit, and 0 when it errored, timed out or was aborted (#26)."""
    if any(turn.outcome is not None for turn in task.turns):
        with fingerprinting(facts.fingerprint):
            score = _score_turns(task, spans)
        if facts.status in _ENDED_BADLY and executes_calls(task) and not agent_calls(spans):
            evidence = dict(score.evidence)
            return _did_nothing(score.value, score.passed, evidence, facts.status, task)
        return score
    spec = task.outcome
    if spec is None:
        return _score(None, None, {"reason": "task has no outcome expectations"})
    with fingerprinting(facts.fingerprint):
        value, passed, evidence = evaluate_outcome(spec, probe_observations(spans))
    if executes_calls(task) and not agent_calls(spans):
        return _did_nothing(value, passed, evidence, facts.status, task)
    return _score(value, passed, evidence)
