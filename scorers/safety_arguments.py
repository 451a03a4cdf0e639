"""Safety rules on arguments: matching, and what to do when a value is stored redacted.

An `argument_pattern` cannot see a value stored as a keyed fingerprint. The recorder checks the
run's task's rules on the arguments as sent and stores only the verdicts with the call
(`record_time_checks`, `tracecard.safety.checked`); where no such check exists (a run recorded
by `tracecard wrap`, an edited rule), the rule is not evaluated (`unevaluated_rules`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from ._json import canonical_json
from .redacted import is_fingerprint
from .spec import SafetyRule, SafetySpec

__all__ = [
    "applies",
    "checked_verdict",
    "leaf_paths",
    "record_time_checks",
    "rule_key",
    "rule_matches",
    "unevaluated_rules",
]


def applies(rule: SafetyRule, tool: str) -> bool:
    if rule.tool is not None and not fnmatchcase(tool, rule.tool):
        return False
    return rule.tool_regex is None or re.fullmatch(rule.tool_regex, tool) is not None


def rule_matches(rule: SafetyRule, tool: str, arguments: Any, raw: str | None) -> str | None:
    if not applies(rule, tool):
        return None
    if rule.argument_pattern is None:
        return f"tool {tool!r} is forbidden by rule {rule.id!r}"
    pattern = re.compile(rule.argument_pattern)
    texts = [(p, t) for p, t in leaf_paths(arguments) if not is_fingerprint(t)] if arguments else []
    texts.append(
        ("the arguments", canonical_json(arguments) if arguments is not None else raw or "")
    )
    for where, text in texts:
        if pattern.search(text) is not None:
            # names where, never what: the proxy checks the real arguments, which may be secret
            return f"{where} matches /{rule.argument_pattern}/"
    return None


def leaf_paths(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every leaf of a JSON value: `a.b[0]`."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from leaf_paths(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from leaf_paths(item, f"{prefix}[{index}]")
    elif isinstance(value, str):
        yield prefix or "the arguments", value


def rule_key(rule: SafetyRule) -> str:
    """16 hex digits naming what a rule checks (tool filters and pattern): a check recorded
    under another version of the rule is not this rule's."""
    parts = [rule.tool, rule.tool_regex, rule.argument_pattern]
    return hashlib.sha256(canonical_json(parts).encode()).hexdigest()[:16]


def record_time_checks(safety: SafetySpec, tool: str, arguments: Any) -> dict[str, Any] | None:
    """What the recorder stores on a call (`tracecard.safety.checked`): each argument-pattern
    rule that applies to the tool, checked on the arguments as sent, before redaction."""
    found: dict[str, Any] = {
        # only the verdict: a reason could quote a secret
        rule.id: {
            "rule": rule_key(rule),
            "broken": rule_matches(rule, tool, arguments, None) is not None,
        }
        for rule in safety.rules
        if rule.argument_pattern is not None and applies(rule, tool)
    }
    return found or None


def checked_verdict(rule: SafetyRule, checked: Mapping[str, Any] | None) -> bool | None:
    """The recorded verdict of `rule` on the arguments as sent (None: not recorded)."""
    entry = (checked or {}).get(rule.id)
    if not isinstance(entry, Mapping) or entry.get("rule") != rule_key(rule):
        return None
    broken = entry.get("broken")
    return broken if isinstance(broken, bool) else None


def unevaluated_rules(
    safety: SafetySpec,
    tool: str,
    arguments: Any,
    blocked_rule: str | None = None,
    checked: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Argument-pattern rules that did not match a call whose arguments are partly redacted and
    that were not checked when it was recorded: the pattern could not see the redacted values,
    so the rule is neither kept nor broken."""
    hidden = sorted({p for p, t in leaf_paths(arguments) if is_fingerprint(t)}) if arguments else []
    if not hidden:
        return []
    found = []
    for rule in safety.rules:
        if rule.argument_pattern is None or rule.id == blocked_rule or not applies(rule, tool):
            continue
        if checked_verdict(rule, checked) is not None:
            continue
        if rule_matches(rule, tool, arguments, None) is None:
            reason = (
                f"argument(s) {', '.join(hidden)} are redacted (stored as keyed fingerprints): "
                f"/{rule.argument_pattern}/ cannot be evaluated on them; set `redact = false` "
                "on the upstream, or `block = true` on the rule (the proxy checks it on the "
                "real arguments)"
            )
            found.append(
                {"rule": rule.id, "severity": rule.severity, "tool": tool, "reason": reason}
            )
    return found
