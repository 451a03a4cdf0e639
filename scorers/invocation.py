"""Invocation: did the agent call the right tools with the right arguments (F1 over calls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .calls import ToolCall, agent_calls
from .registry import scorer
from .spec import ExpectedCall, InvocationSpec
from .suite import Task
from .types import ComponentScore, RunFacts, Span

__all__ = ["call_matches", "match_calls", "score_invocation"]

NAME = "invocation"
VERSION = "1"


def call_matches(expected: ExpectedCall, call: ToolCall) -> list[str]:
    """Reasons `call` does not satisfy `expected`; an empty list means it matches."""
    if call.tool != expected.tool:
        return [f"tool is {call.tool!r}, expected {expected.tool!r}"]
    if expected.upstream is not None and call.upstream != expected.upstream:
        return [f"upstream is {call.upstream!r}, expected {expected.upstream!r}"]
    if call.arguments is None:
        return [f"arguments unreadable ({call.arguments_error}); treated as unmatched"]
    reasons = []
    for name, matcher in expected.arguments.items():
        result = matcher.match(name in call.arguments, call.arguments.get(name))
        if not result.ok:
            reasons.append(f"{name}: {result.reason}")
    if expected.strict_arguments:
        extra = sorted(set(call.arguments) - set(expected.arguments))
        if extra:
            reasons.append(f"unexpected arguments: {', '.join(extra)}")
    return reasons


def _match_any(ok: list[list[bool]]) -> dict[int, int]:
    # Maximum bipartite matching (Kuhn's augmenting paths): expected index -> call index.
    owner: dict[int, int] = {}

    def augment(e: int, seen: set[int]) -> bool:
        for c, fits in enumerate(ok[e]):
            if fits and c not in seen:
                seen.add(c)
                if c not in owner or augment(owner[c], seen):
                    owner[c] = e
                    return True
        return False

    for e in range(len(ok)):
        augment(e, set())
    return {e: c for c, e in owner.items()}


def _match_subsequence(ok: list[list[bool]], n_calls: int) -> dict[int, int]:
    # Longest common subsequence under the match predicate, order preserved.
    n_exp = len(ok)
    best = [[0] * (n_calls + 1) for _ in range(n_exp + 1)]
    for e in range(n_exp - 1, -1, -1):
        for c in range(n_calls - 1, -1, -1):
            take = best[e + 1][c + 1] + 1 if ok[e][c] else 0
            best[e][c] = max(take, best[e + 1][c], best[e][c + 1])
    pairs: dict[int, int] = {}
    e = c = 0
    while e < n_exp and c < n_calls:
        if ok[e][c] and best[e][c] == best[e + 1][c + 1] + 1:
            pairs[e] = c
            e, c = e + 1, c + 1
        elif best[e + 1][c] >= best[e][c + 1]:
            e += 1
        else:
            c += 1
    return pairs


def _match_sequence(ok: list[list[bool]], n_calls: int) -> dict[int, int]:
    # Longest block of consecutive expected calls made back to back, with no call between.
    best: tuple[int, int, int] = (0, 0, 0)  # length, first expected, first call
    for e0 in range(len(ok)):
        for c0 in range(n_calls):
            length = 0
            while e0 + length < len(ok) and c0 + length < n_calls and ok[e0 + length][c0 + length]:
                length += 1
            if length > best[0]:
                best = (length, e0, c0)
    length, e0, c0 = best
    return {e0 + i: c0 + i for i in range(length)}


def match_calls(spec: InvocationSpec, calls: Sequence[ToolCall]) -> dict[int, int]:
    """Pair expected calls with agent calls per the spec's order mode (expected -> call index)."""
    ok = [[not call_matches(exp, call) for call in calls] for exp in spec.calls]
    if spec.order == "any":
        return _match_any(ok)
    if spec.order == "subsequence":
        return _match_subsequence(ok, len(calls))
    return _match_sequence(ok, len(calls))


def _call_ref(call: ToolCall) -> dict[str, Any]:
    ref: dict[str, Any] = {"span_id": call.span_id, "tool": call.tool}
    if call.blocked:
        ref["blocked"] = True
    return ref


def _abstention(calls: list[ToolCall]) -> ComponentScore:
    ok = not calls
    evidence = {
        "mode": "expect_no_calls",
        "calls": [_call_ref(c) for c in calls],
        "note": "no call expected" if ok else f"{len(calls)} call(s) made where none was expected",
    }
    return ComponentScore(
        component=NAME,
        value=1.0 if ok else 0.0,
        passed=ok,
        evidence=evidence,
        scorer=NAME,
        version=VERSION,
    )


@scorer(name=NAME, component=NAME, version=VERSION)
def score_invocation(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    """F1 of expected calls matched by agent calls (blocked calls count as attempted)."""
    spec = task.invocation
    if spec is None:
        return ComponentScore(
            component=NAME,
            value=None,
            passed=None,
            scorer=NAME,
            version=VERSION,
            evidence={"reason": "task has no invocation expectations"},
        )
    calls = agent_calls(spans)
    if spec.expect_no_calls:
        return _abstention(calls)
    pairs = match_calls(spec, calls)
    matched = len(pairs)
    used = set(pairs.values())
    extras = [c for i, c in enumerate(calls) if i not in used]
    counted = len(calls) if not spec.allow_extra else matched
    precision = matched / counted if counted else 0.0
    recall = matched / len(spec.calls)
    f1 = 2 * matched / (len(spec.calls) + counted) if matched else 0.0
    expected_evidence = []
    for e_index, exp in enumerate(spec.calls):
        row: dict[str, Any] = {"tool": exp.tool, "span_id": None}
        if e_index in pairs:
            row["span_id"] = calls[pairs[e_index]].span_id
        else:
            near = [c for c in calls if c.tool == exp.tool]
            row["closest"] = [{"span_id": c.span_id, "why": call_matches(exp, c)} for c in near]
            if not near:
                row["why"] = "no call to this tool"
            elif spec.order != "any" and all(not call_matches(exp, c) for c in near):
                row["why"] = f"a matching call exists but not in {spec.order} order"
        expected_evidence.append(row)
    evidence = {
        "order": spec.order,
        "allow_extra": spec.allow_extra,
        "expected": expected_evidence,
        "extra_calls": [_call_ref(c) for c in extras],
        "matched": matched,
        "precision": round(precision, 6),
        "recall": round(recall, 6),
    }
    return ComponentScore(
        component=NAME,
        value=f1,
        passed=f1 == 1.0,
        evidence=evidence,
        scorer=NAME,
        version=VERSION,
    )
