"""A run's verdict in one word, with the first failing component and why in one line: what the
runs list shows a person triaging failures."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from tracecard.scorers.registry import component_key
from tracecard.scorers.types import LIVE_STATUSES

__all__ = [
    "SCORE_VERDICTS",
    "VERDICTS",
    "RunVerdict",
    "failure_reason",
    "run_verdict",
    "scores_verdict",
]

# The verdicts, in the order a filter offers them; `errored`: the run itself broke (the agent or
# its harness crashed), whatever its scores.
VERDICTS: Final = ("passed", "failed", "not_evaluated", "errored")
# What the scores alone say (`scores_verdict`), stored on the run as `runs.score_verdict` when
# its scores are written, so that the runs list filters on it by index
# (`tracecard.traces.run_list`); the run's status decides the rest (`run_verdict`).
SCORE_VERDICTS: Final = ("passed", "failed", "not_evaluated")
REASON_MAX: Final = 160
OBSERVED_MAX: Final = 40  # characters of a value the agent sent, in a reason
_FINGERPRINT: Final = re.compile(r"\[redacted:[0-9a-f]{16}\]")


@dataclass(frozen=True)
class RunVerdict:
    """`word` is a verdict, or the live run's status while it is live (`pending`: created, not
    started; `running`); `component` and `reason` name the first failing component (in
    component order) and why, when failed."""

    word: str
    component: str | None = None
    reason: str | None = None

    @property
    def label(self) -> str:
        return self.word.replace("_", " ")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_MAX else line[: REASON_MAX - 1] + "…"


def _invocation(evidence: Mapping[str, Any]) -> str | None:
    if evidence.get("mode") == "expect_no_calls":
        return str(evidence.get("note") or "calls made where none was expected")
    if evidence.get("mode") == "per_turn":
        for turn in evidence.get("turns") or []:
            if turn.get("passed") is False:
                why = turn.get("reason") or _invocation(turn) or "failed"
                return f"turn {turn.get('turn')}: {why}"
        return None
    for row in evidence.get("expected") or []:
        if row.get("span_id"):
            continue
        tool = row.get("tool")
        if row.get("why") == "no call to this tool":
            return f"{tool}: not called"
        if row.get("why"):
            return f"{tool}: {row['why']}"
        for near in row.get("closest") or []:
            why = near.get("why") or []
            if why:
                return f"{tool}: {_with_got(str(why[0]), (near.get('got') or [None])[0])}"
        return f"{tool}: no matching call"
    extra = evidence.get("extra_calls") or []
    if extra:
        return f"{len(extra)} extra call(s)"
    return None


def _capped(text: str) -> str:
    return text if len(text) <= OBSERVED_MAX else text[: OBSERVED_MAX - 1] + "…"


def observed_text(value: Any) -> str:
    """A value the agent sent, as one quoted, escaped, capped token: a newline, a quote or
    "…, got 'x'" inside it stays inside its quotes; a redacted value is never shown."""
    if _redacted(value):
        return "a different value (redacted)"
    if isinstance(value, str):
        return repr(_capped(value))  # repr escapes newlines and picks quotes the value lacks
    return _capped(orjson.dumps(value).decode())  # JSON: strings inside stay quoted


def _redacted(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_redacted(v) or _redacted(k) for k, v in value.items())
    if isinstance(value, list):
        return any(_redacted(v) for v in value)
    return isinstance(value, str) and (
        _FINGERPRINT.search(value) is not None or "[REDACTED]" in value
    )


def _with_got(why: str, sent: Any) -> str:
    """An argument's reason with what the call sent: "p: expected 'a', got 'b'"; a reason
    stored without `got` (invocation before version 7) is said as it was."""
    if not isinstance(sent, Mapping):
        return why
    name, _, said = why.partition(": ")
    if sent.get("missing"):
        return f"{name}: {said}" if said != "argument missing" else f"{name}: missing"
    if "value" not in sent:
        return why
    if _redacted(sent["value"]):
        return f"{name}: got a different value (redacted)"  # the expectation is the secret
    return f"{why}, got {observed_text(sent['value'])}"


def _outcome(evidence: Mapping[str, Any]) -> str | None:
    for row in evidence.get("predicates") or []:
        if row.get("holds") is False:
            where = f"{row.get('probe')} {row.get('path')}"
            said = row.get("reason")
            if said and not (str(said).endswith(" failed") and "observed" in row):
                return f"{where}: {said}"  # e.g. "… does not exist": nothing was observed
            # a comparison that failed ("eq 'urgent' failed"): what was observed beside it
            if _redacted(row.get("value")) or _redacted(row.get("observed")):
                return f"{where}: got a different value (redacted)"
            expected = observed_text(row.get("value"))
            observed = observed_text(row.get("observed"))
            return f"{where}: expected {row.get('op')} {expected}, got {observed}"
    return None


def _safety(evidence: Mapping[str, Any]) -> str | None:
    for violation in evidence.get("violations") or []:
        tool = f" ({violation['tool']})" if violation.get("tool") else ""
        rule = f"{violation.get('severity')} {violation.get('rule')}{tool}"
        return f"{rule}: {violation.get('reason')}"
    return None


def _completion(evidence: Mapping[str, Any]) -> str | None:
    for check in evidence.get("checks") or []:
        if check.get("passed") is False:
            return f"{check.get('spec') or check.get('check')}: {check.get('reason') or 'failed'}"
    return None


def _efficiency(evidence: Mapping[str, Any]) -> str | None:
    parts = evidence.get("parts") or {}
    short = sorted((v, k) for k, v in parts.items() if isinstance(v, (int, float)) and v < 1)
    found = []
    if evidence.get("optimal_calls") is not None and "call_economy" in parts:
        found.append(f"{evidence.get('calls')} calls for {evidence['optimal_calls']} optimal")
    if evidence.get("redundant"):
        found.append(f"{len(evidence['redundant'])} redundant call(s)")
    errors = evidence.get("errors") or []
    if errors:
        kept = sum(1 for e in errors if not e.get("recovered"))
        found.append(f"{len(errors)} tool error(s), {kept} not recovered")
    found += [f"{k.replace('_', ' ')} {v:.2f}" for v, k in short if k not in _EFFICIENCY_SAID]
    return "; ".join(found) or None


_EFFICIENCY_SAID = frozenset({"call_economy", "non_redundant", "error_handling"})

_BY_COMPONENT = {
    "efficiency": _efficiency,
    "invocation": _invocation,
    "outcome": _outcome,
    "safety": _safety,
    "completion": _completion,
}


def failure_reason(component: str, evidence: Mapping[str, Any]) -> str:
    """Why `component` failed, in one line, from its evidence."""
    reason = evidence.get("reason")
    if not isinstance(reason, str) or not reason:
        explain = _BY_COMPONENT.get(component)
        found = explain(evidence) if explain is not None else None
        reason = found or str(evidence.get("note") or "failed (see the evidence)")
    return _one_line(reason)


def run_verdict(status: str, scores: Sequence[Any]) -> RunVerdict:
    """The run's verdict from its status and scores (objects with `component`, `passed`,
    `evidence`): errored > failed > passed > not evaluated; `pending` or `running` (the
    status) while live, as the status filter says them."""
    if status in LIVE_STATUSES:
        return RunVerdict(status)
    if status == "errored":
        return RunVerdict("errored")
    return scores_verdict(scores)


def scores_verdict(scores: Sequence[Any]) -> RunVerdict:
    """What the scores alone say: failed (any component failed; the first in component order
    and why) > passed (one passed) > not evaluated. The run's verdict once it ended, unless it
    errored."""
    failing = [s for s in scores if s.passed is False]
    if failing:
        first = min(failing, key=lambda s: component_key(s.component))
        reason = failure_reason(first.component, first.evidence or {})
        return RunVerdict("failed", first.component, reason)
    if any(s.passed for s in scores):
        return RunVerdict("passed")
    return RunVerdict("not_evaluated")
