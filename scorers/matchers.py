"""Argument matchers and final-answer checks: validating models plus their evaluation.

Both are written as a table with exactly one kind key, e.g. `{ regex = "^/tmp" }`; a bare
value is shorthand for `{ exact = value }`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationInfo, model_validator

from ._json import canonical_json, normalise, parse_json_text
from .equality import JSON_TYPES, JsonType, bfcl_equal, has_type, python_equal, type_name
from .redacted import CANNOT_COMPARE, NotComparable, contains_fingerprint, equal, is_fingerprint

__all__ = [
    "NORMALIZE_MODES",
    "AnswerCheck",
    "ArgMatcher",
    "MatchResult",
    "extract_numbers",
    "load_json_schema",
    "not_evaluated",
    "strict_default",
]

MatcherKind = Literal["exact", "any", "regex", "one_of", "number", "subset"]
CheckKind = Literal["exact", "contains", "regex", "number", "json_schema"]
_MATCHER_KINDS: tuple[str, ...] = ("exact", "any", "regex", "one_of", "number", "subset")
_CHECK_KINDS: tuple[str, ...] = ("exact", "contains", "regex", "number", "json_schema")
# exact / one_of: "default" (NFC, trimmed, 1 == 1.0), "python" (Python's ==), "bfcl" (BFCL's
# string standardisation, then Python's ==); docs/suites.md, Matchers
Normalize = Literal["default", "python", "bfcl"]
NORMALIZE_MODES: tuple[str, ...] = ("default", "python", "bfcl")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _pick_kind(raw: Any, kinds: tuple[str, ...], what: str) -> Any:
    if not isinstance(raw, dict):
        return {"exact": raw, "kind": "exact"}
    if raw.get("kind") in kinds:
        return raw  # already explicit (e.g. a dumped model read back)
    present = [k for k in kinds if k in raw]
    if len(present) != 1:
        found = ", ".join(present) if present else "none"
        raise ValueError(f"{what} needs exactly one of {', '.join(kinds)} (found: {found})")
    return {**raw, "kind": present[0]}


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"regex does not compile: {exc}") from exc


def load_json_schema() -> Any:
    """The jsonschema module, imported lazily (it ships no type information)."""
    import importlib

    return importlib.import_module("jsonschema")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().replace(",", ""))
        except ValueError:
            return None
    return None


def extract_numbers(text: str) -> list[float]:
    """Every number written in `text` (thousands separators allowed)."""
    return [float(m.group(0).replace(",", "")) for m in _NUMBER.finditer(text)]


class MatchResult(BaseModel):
    """Whether a value satisfied a matcher or check, and why not."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    reason: str = ""
    note: str | None = None
    evaluated: bool = True  # False: the value could not be judged (e.g. it is redacted)


def not_evaluated(reason: str) -> MatchResult:
    """A value that cannot be judged: never a pass, never a silent fail."""
    return MatchResult(ok=False, reason=f"not evaluated: {reason}", evaluated=False)


def strict_default(raw: Any, info: ValidationInfo) -> Any:
    """The suite's `strict = true` for a matcher or predicate that does not say (validation
    context `strict_default`)."""
    if isinstance(raw, dict) and "strict" not in raw and (info.context or {}).get("strict_default"):
        return {**raw, "strict": True}
    return raw


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    return equal(expected, actual)


class ArgMatcher(BaseModel):
    """How one argument of an expected call is matched."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: MatcherKind
    exact: JsonValue = None
    any: bool = False
    regex: str | None = None
    one_of: list[JsonValue] | None = None
    number: float | None = None
    tolerance: float = 1e-9
    subset: dict[str, JsonValue] | None = None
    strict: bool = False  # exact / one_of: no trimming, no NFC, 1 is not 1.0
    normalize: Normalize = "default"  # exact / one_of: how values are compared
    type: list[JsonType] | None = None  # the value's JSON type must be one of these
    items: list[JsonType] | None = None  # each item of an array value must be of these types
    optional: bool = False  # the argument may be left out; when given, it must match

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, raw: Any, info: ValidationInfo) -> Any:
        found = _pick_kind(raw, _MATCHER_KINDS, "a matcher")
        for key in ("type", "items"):  # one type may be written without a list
            if isinstance(found.get(key), str):
                found = {**found, key: [found[key]]}
        if found.get("normalize", "default") != "default":
            return found  # an explicit comparison: the suite's strict default does not apply
        return strict_default(found, info)

    @model_validator(mode="after")
    def _check(self) -> ArgMatcher:
        if self.kind == "regex":
            _compile(self.regex or "")
        if self.kind == "any" and not self.any:
            raise ValueError("`any` may only be true")
        if self.kind == "number" and self.number is None:
            raise ValueError("`number` needs a number")
        if self.tolerance < 0:
            raise ValueError("tolerance must not be negative")
        if self.strict and self.kind not in ("exact", "one_of"):
            raise ValueError("`strict` applies to exact and one_of only")
        if self.normalize != "default":
            if self.kind not in ("exact", "one_of"):
                raise ValueError("`normalize` applies to exact and one_of only")
            if self.strict:
                raise ValueError("give `strict` or `normalize`, not both")
        if self.normalize == "bfcl":
            values = [self.exact] if self.kind == "exact" else list(self.one_of or [])
            for value in values:
                if not isinstance(value, str | list | dict):
                    raise ValueError(
                        f'{{ {self.kind}, normalize = "bfcl" }} standardises strings, and '
                        f"{value!r} is {type_name(value)}, not a string (nor an array or "
                        'object of them): compare it with normalize = "python"'
                    )
        for key in ("type", "items"):
            if getattr(self, key) == []:
                raise ValueError(f"`{key}` needs at least one of {', '.join(JSON_TYPES)}")
        return self

    def describe(self) -> Any:
        """The matcher as written, for evidence."""
        value = getattr(self, self.kind)
        if self.kind == "number":
            found: dict[str, Any] = {"number": value, "tolerance": self.tolerance}
        else:
            found = {self.kind: value, "strict": True} if self.strict else {self.kind: value}
        if self.normalize != "default":
            found["normalize"] = self.normalize
        for key in ("type", "items"):
            if getattr(self, key) is not None:
                found[key] = getattr(self, key)
        return found

    def match(self, present: bool, actual: Any) -> MatchResult:
        """Match an argument value (`present` False when the call lacks the argument)."""
        if not present:
            return MatchResult(ok=self.optional, reason="" if self.optional else "argument missing")
        wrong = self._wrong_type(actual)
        if wrong:
            return MatchResult(ok=False, reason=wrong)
        if self.kind == "any":
            return MatchResult(ok=True)
        try:
            return self._match(actual)
        except NotComparable as exc:
            return not_evaluated(str(exc))

    def _wrong_type(self, actual: Any) -> str:
        if is_fingerprint(actual) and (self.type or self.items):
            return ""  # a redacted string: its type is checked no further than that
        if self.type is not None and not has_type(actual, list(self.type)):
            return f"expected type {' or '.join(self.type)}, got {type_name(actual)}"
        if self.items is not None and isinstance(actual, list):
            for index, item in enumerate(actual):
                if not has_type(item, list(self.items)):
                    wanted = " or ".join(self.items)
                    return f"item {index}: expected type {wanted}, got {type_name(item)}"
        return ""

    def _equal(self, expected: Any, actual: Any) -> bool:
        if self.normalize == "default":
            return equal(expected, actual, self.strict)
        if contains_fingerprint(actual):
            if self.normalize == "bfcl":
                raise NotComparable("a redacted value cannot be standardised (normalize = bfcl)")
            return equal(expected, actual, True)
        if self.normalize == "bfcl":
            return bfcl_equal(expected, actual)
        return python_equal(expected, actual)

    def _match(self, actual: Any) -> MatchResult:
        redacted = is_fingerprint(actual)
        if redacted and self.kind in ("regex", "number"):
            return not_evaluated("the argument " + CANNOT_COMPARE.format(kind=self.kind))
        if self.kind == "exact":
            ok = self._equal(self.exact, actual)
            return MatchResult(ok=ok, reason="" if ok else f"expected {self.exact!r}")
        if self.kind == "one_of":
            ok = any(self._equal(v, actual) for v in self.one_of or [])
            return MatchResult(ok=ok, reason="" if ok else f"not one of {self.one_of!r}")
        if self.kind == "regex":
            text = actual if isinstance(actual, str) else canonical_json(actual)
            ok = _compile(self.regex or "").search(text) is not None
            return MatchResult(ok=ok, reason="" if ok else f"does not match /{self.regex}/")
        if self.kind == "number":
            number = _as_number(actual)
            target = float(self.number or 0.0)
            ok = number is not None and math.isclose(
                number, target, rel_tol=0.0, abs_tol=self.tolerance
            )
            return MatchResult(
                ok=ok, reason="" if ok else f"not within {self.tolerance} of {target}"
            )
        ok = _subset(self.subset, normalise(actual))
        return MatchResult(ok=ok, reason="" if ok else f"does not contain {self.subset!r}")


class AnswerCheck(BaseModel):
    """One check on the run's final answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: CheckKind
    exact: str | None = None
    contains: str | None = None
    regex: str | None = None
    number: float | None = None
    tolerance: float = 1e-9
    json_schema: dict[str, JsonValue] | None = None
    case_sensitive: bool = True

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise ValueError(f"an answer check is a table with one of {', '.join(_CHECK_KINDS)}")
        return _pick_kind(raw, _CHECK_KINDS, "an answer check")

    @model_validator(mode="after")
    def _check(self) -> AnswerCheck:
        if self.kind == "regex":
            _compile(self.regex or "")
        if getattr(self, self.kind) is None:
            raise ValueError(f"`{self.kind}` needs a value")
        if self.kind == "json_schema":
            jsonschema = load_json_schema()
            try:
                jsonschema.validators.validator_for(self.json_schema).check_schema(self.json_schema)
            except jsonschema.exceptions.SchemaError as exc:
                raise ValueError(f"json_schema is not a valid schema: {exc.message}") from exc
        return self

    def _fold(self, text: str) -> str:
        return text if self.case_sensitive else text.casefold()

    def check(self, answer: str | None) -> MatchResult:
        """Check a final answer; a missing answer fails every check."""
        if answer is None:
            return MatchResult(ok=False, reason="no final answer")
        if self.kind == "exact":
            ok = self._fold(normalise(answer)) == self._fold(normalise(self.exact or ""))
            return MatchResult(ok=ok, reason="" if ok else "answer differs")
        if self.kind == "contains":
            ok = self._fold(self.contains or "") in self._fold(answer)
            reason = "" if ok else f"answer does not contain {self.contains!r}"
            return MatchResult(ok=ok, reason=reason, note="substring match")
        if self.kind == "regex":
            flags = 0 if self.case_sensitive else re.IGNORECASE
            ok = re.search(self.regex or "", answer, flags) is not None
            return MatchResult(ok=ok, reason="" if ok else f"answer does not match /{self.regex}/")
        if self.kind == "number":
            return self._check_number(answer)
        return self._check_schema(answer)

    def _check_number(self, answer: str) -> MatchResult:
        target = float(self.number or 0.0)
        whole = _as_number(answer)
        numbers = [whole] if whole is not None else extract_numbers(answer)
        note = None if whole is not None else "number extracted from text"
        ok = any(math.isclose(n, target, rel_tol=0.0, abs_tol=self.tolerance) for n in numbers)
        reason = "" if ok else f"no number within {self.tolerance} of {target} (found {numbers})"
        return MatchResult(ok=ok, reason=reason, note=note)

    def _check_schema(self, answer: str) -> MatchResult:
        parsed = parse_json_text(answer.strip())
        if parsed.error is not None:
            return MatchResult(ok=False, reason=f"answer is {parsed.error}")
        jsonschema = load_json_schema()
        validator = jsonschema.validators.validator_for(self.json_schema)(self.json_schema)
        errors = sorted(validator.iter_errors(parsed.value), key=lambda e: list(e.path))
        if errors:
            return MatchResult(ok=False, reason=f"schema violation: {errors[0].message}")
        return MatchResult(ok=True)

    def describe(self) -> dict[str, Any]:
        """The check as written, for evidence."""
        spec: dict[str, Any] = {self.kind: getattr(self, self.kind)}
        if self.kind == "number":
            spec["tolerance"] = self.tolerance
        if not self.case_sensitive:
            spec["case_sensitive"] = False
        return spec
