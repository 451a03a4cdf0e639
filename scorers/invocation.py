"""Invocation: did the agent call the right tools with the right arguments (F1 over calls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .calls import ToolCall, agent_calls
from .efficiency import call_identity
from .model import model_turns, requested_as_tool_calls
from .redacted import fingerprinting
from .registry import scorer
from .spec import ExpectedCall, InvocationSpec
from .suite import Task
from .turns import calls_by_turn, turn_spans
from .types import ComponentScore, RunFacts, Span

__all__ = [
    "call_matches",
    "call_mismatches",
    "evaluate_calls",
    "match_calls",
    "repeated_calls",
    "score_invocation",
]

_NOT_EVALUATED = ": not evaluated: "
NAME = "invocation"
# 2: per-turn expectations, matchers on results; 3: source, model abstention
# 4: redacted arguments compared by fingerprint; regex/number on them not evaluated; strict
# 5: matchers' `normalize` ("python", "bfcl"), `type` and `items`
# 6: identical calls beyond the suite's max_repeats are charged (allow_extra too) and fail; a
#    run that did not end on its own (errored, timed out, aborted) never passes
# 7: a closest call's `got` says what it sent for each failing argument (the first failure's
#    one-line reason reads "expected X, got Y"); values and verdicts are unchanged
VERSION = "7"
_ENDED_BADLY = ("errored", "timed_out", "aborted")


def call_matches(expected: ExpectedCall, call: ToolCall) -> list[str]:
    """Reasons `call` does not satisfy `expected`; an empty list means it matches."""
    return [reason for reason, _ in call_mismatches(expected, call)]


def call_mismatches(
    expected: ExpectedCall, call: ToolCall
) -> list[tuple[str, dict[str, Any] | None]]:
    """Each reason `call` does not satisfy `expected`, with what the call sent for it: an
    argument's value as stored (`{"value": …}`, a fingerprint when redacted), `{"missing":
    True}`, or None when the reason says it all."""
    if call.tool != expected.tool:
        return [(f"tool is {call.tool!r}, expected {expected.tool!r}", None)]
    if expected.upstream is not None and call.upstream != expected.upstream:
        return [(f"upstream is {call.upstream!r}, expected {expected.upstream!r}", None)]
    if call.arguments is None:
        return [(f"arguments unreadable ({call.arguments_error}); treated as unmatched", None)]
    reasons: list[tuple[str, dict[str, Any] | None]] = []
    for name, matcher in expected.arguments.items():
        present = name in call.arguments
        result = matcher.match(present, call.arguments.get(name))
        if not result.ok:
            sent = {"value": call.arguments[name]} if present else {"missing": True}
            reasons.append((f"{name}: {result.reason}", sent))
    if expected.strict_arguments:
        extra = sorted(set(call.arguments) - set(expected.arguments))
        if extra:
            reasons.append((f"unexpected arguments: {', '.join(extra)}", None))
    if expected.result is not None:
        text = call.result_text
        result = expected.result.match(text is not None, text)
        if not result.ok:
            reasons.append((f"result: {result.reason}", None))
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
    return _with_answers(ref, call)


def _with_answers(row: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """A multi round-trip call's rounds and the agent's answers to the server's questions
    (elicitation, sampling), as evidence beside the call."""
    if call.rounds > 1:
        row["rounds"] = call.rounds
    if call.answers:
        row["answers"] = call.answers
    return row


def _closest(expected: ExpectedCall, call: ToolCall) -> dict[str, Any]:
    # `got[i]` is what the call sent for `why[i]` (None: the reason says it all)
    mismatches = call_mismatches(expected, call)
    row: dict[str, Any] = {"span_id": call.span_id, "why": [w for w, _ in mismatches]}
    row["got"] = [sent for _, sent in mismatches]
    return _with_answers(row, call)


def _abstention(calls: list[ToolCall]) -> tuple[float, bool, dict[str, Any]]:
    ok = not calls
    evidence = {
        "mode": "expect_no_calls",
        "calls": [_call_ref(c) for c in calls],
        "note": "no call expected" if ok else f"{len(calls)} call(s) made where none was expected",
    }
    return (1.0 if ok else 0.0), ok, evidence


def _undecided(row: dict[str, Any]) -> bool:
    # An unmatched expected call with a candidate whose only failures could not be judged
    # (e.g. a regex on a redacted argument): the match is unknown, not failed.
    return any(
        c["why"] and all(_NOT_EVALUATED in reason for reason in c["why"])
        for c in row.get("closest", [])
    )


def repeated_calls(calls: list[ToolCall], max_repeats: int) -> list[dict[str, Any]]:
    """Identical calls (tool, upstream, arguments) made more than `max_repeats` times: the
    tool, how many times, and the span ids of the calls beyond the allowance."""
    groups: dict[str, list[ToolCall]] = {}
    for call in calls:
        groups.setdefault(call_identity(call), []).append(call)
    return [
        {
            "tool": same[0].tool,
            "times": len(same),
            "charged": [c.span_id for c in same[max_repeats:]],
        }
        for same in groups.values()
        if len(same) > max_repeats
    ]


def evaluate_calls(
    spec: InvocationSpec, calls: list[ToolCall], max_repeats: int = 2
) -> tuple[float | None, bool | None, dict[str, Any]]:
    """(value, passed, evidence) of `calls` against one invocation spec: F1 over matched calls,
    or abstention when the spec expects no call; None when a match could not be judged.
    Identical calls beyond `max_repeats` count against precision even with `allow_extra`, and
    fail the score."""
    if spec.expect_no_calls:
        return _abstention(calls)
    pairs = match_calls(spec, calls)
    matched = len(pairs)
    used = set(pairs.values())
    extras = [c for i, c in enumerate(calls) if i not in used]
    repeats = repeated_calls(calls, max_repeats)
    charged = sum(len(r["charged"]) for r in repeats)
    counted = len(calls) if not spec.allow_extra else matched + charged
    precision = matched / counted if counted else 0.0
    recall = matched / len(spec.calls)
    f1 = 2 * matched / (len(spec.calls) + counted) if matched else 0.0
    expected_evidence = []
    for e_index, exp in enumerate(spec.calls):
        row: dict[str, Any] = {"tool": exp.tool, "span_id": None}
        if e_index in pairs:
            row["span_id"] = calls[pairs[e_index]].span_id
            _with_answers(row, calls[pairs[e_index]])
        else:
            near = [c for c in calls if c.tool == exp.tool]
            row["closest"] = [_closest(exp, c) for c in near]
            if not near:
                row["why"] = "no call to this tool"
            elif spec.order != "any" and all(not call_matches(exp, c) for c in near):
                row["why"] = f"a matching call exists but not in {spec.order} order"
        expected_evidence.append(row)
    evidence: dict[str, Any] = {
        "order": spec.order,
        "allow_extra": spec.allow_extra,
        "expected": expected_evidence,
        "extra_calls": [_call_ref(c) for c in extras],
        "matched": matched,
        "precision": round(precision, 6),
        "recall": round(recall, 6),
    }
    undecided = [row["tool"] for row in expected_evidence if _undecided(row)]
    if undecided:
        evidence["reason"] = f"expected call(s) {undecided} could not be judged (see closest)"
        return None, None, evidence
    if repeats:
        evidence["max_repeats"] = max_repeats
        evidence["repeated"] = repeats
        evidence["reason"] = f"identical calls beyond max_repeats = {max_repeats}: " + ", ".join(
            f"{r['tool']} ×{r['times']}" for r in repeats
        )
        return f1, False, evidence
    return f1, f1 == 1.0, evidence


def _score(value: float | None, passed: bool | None, evidence: dict[str, Any]) -> ComponentScore:
    return ComponentScore(
        component=NAME,
        value=value,
        passed=passed,
        evidence=evidence,
        scorer=NAME,
        version=VERSION,
    )


def _score_turns(task: Task, spans: Sequence[Span]) -> ComponentScore:
    # Per turn: the calls made while the turn was the latest one handed out, against that
    # turn's spec. The run's value is the mean over turns with a spec; it passes when all pass.
    reached = turn_spans(spans)
    grouped = calls_by_turn(list(spans), len(task.turns))
    rows: list[dict[str, Any]] = []
    for index, turn in enumerate(task.turns):
        if turn.invocation is None:
            continue
        row: dict[str, Any] = {"turn": index}
        if index not in reached:
            row |= {"value": 0.0, "passed": False, "reason": "turn not reached"}
        else:
            value, passed, evidence = evaluate_calls(
                turn.invocation, grouped.get(index, []), task.scoring.max_repeats
            )
            row |= {"value": value, "passed": passed, "span_id": reached[index].span_id}
            row |= evidence
        rows.append(row)
    if not rows:
        return _score(None, None, {"reason": "no turn has invocation expectations"})
    if any(r["value"] is None for r in rows):
        unknown = [r["turn"] for r in rows if r["value"] is None]
        return _score(
            None,
            None,
            {"mode": "per_turn", "turns": rows, "reason": f"turn(s) {unknown} could not be judged"},
        )
    value = sum(r["value"] for r in rows) / len(rows)
    passed = all(r["passed"] for r in rows)
    return _score(value, passed, {"mode": "per_turn", "turns": rows})


@scorer(name=NAME, component=NAME, version=VERSION)
def score_invocation(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    """F1 of expected calls matched by agent calls (blocked calls count as attempted); for a
    multi-turn task, per turn, averaged over the turns that say what they expect. Identical
    calls beyond the suite's `max_repeats` fail it; so does a run that did not end on its own."""
    score = _score_calls(task, spans, facts)
    if facts.status in _ENDED_BADLY and score.passed:
        # the calls matched, but a run that did not end on its own never passes
        evidence = {**score.evidence, "reason": f"run did not end on its own ({facts.status})"}
        return _score(score.value, False, evidence)
    return score


def _score_calls(task: Task, spans: Sequence[Span], facts: RunFacts) -> ComponentScore:
    with fingerprinting(facts.fingerprint):
        if any(turn.invocation is not None for turn in task.turns):
            return _score_turns(task, spans)
        spec = task.invocation
        if spec is None:
            return _score(None, None, {"reason": "task has no invocation expectations"})
        turns = model_turns(spans)
        requested = requested_as_tool_calls(turns)
        calls = requested if spec.source == "model" else agent_calls(spans)
        if spec.expect_no_calls and spec.source == "tools" and requested:
            calls = calls + requested  # abstaining is the model's choice: a requested call counts
        value, passed, evidence = evaluate_calls(spec, calls, task.scoring.max_repeats)
        evidence["source"] = spec.source
        if spec.source == "model":
            evidence["model_turns"] = len(turns)
        return _score(value, passed, evidence)
