from __future__ import annotations

import pytest
from pydantic import ValidationError

from tracecard.scorers.matchers import AnswerCheck, ArgMatcher


def m(raw: object) -> ArgMatcher:
    return ArgMatcher.model_validate(raw)


@pytest.mark.parametrize(
    ("matcher", "actual", "ok"),
    [
        ({"exact": "notes.txt"}, "  notes.txt ", True),  # whitespace trimmed
        ({"exact": "café"}, "cafe\u0301", True),  # NFC normalisation
        ({"exact": 3}, 3.0, True),
        ({"exact": 1}, True, False),  # booleans are not numbers
        ({"exact": {"a": 1, "b": [1, 2]}}, {"b": [1, 2], "a": 1.0}, True),
        ({"exact": "Notes"}, "notes", False),  # exact is case-sensitive
        ("notes.txt", "notes.txt", True),  # bare value = exact
        ({"any": True}, None, True),
        ({"regex": r"notes\.txt$"}, "/sandbox/notes.txt", True),
        ({"regex": r"^notes"}, "/sandbox/notes.txt", False),
        ({"regex": r"^42$"}, 42, True),  # non-strings matched on their JSON text
        ({"one_of": ["a", "b"]}, "b", True),
        ({"one_of": ["a", "b"]}, "c", False),
        ({"number": 3.14, "tolerance": 0.01}, 3.145, True),
        ({"number": 3.14, "tolerance": 0.01}, "3.141", True),  # numeric strings accepted
        ({"number": 3.14, "tolerance": 0.01}, 3.2, False),
        ({"number": 1}, True, False),
        ({"subset": {"a": 1}}, {"a": 1, "b": 2}, True),
        ({"subset": {"a": {"x": 1}}}, {"a": {"x": 1, "y": 2}}, True),
        ({"subset": {"a": 1}}, {"b": 2}, False),
        ({"subset": {"a": 1}}, "a=1", False),
    ],
)
def test_arg_matchers(matcher: object, actual: object, ok: bool) -> None:
    assert m(matcher).match(True, actual).ok is ok


def test_missing_argument_never_matches_even_any() -> None:
    result = m({"any": True}).match(False, None)
    assert not result.ok and result.reason == "argument missing"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"regex": "("}, "regex does not compile"),
        ({"regex": "a", "exact": "a"}, "exactly one of"),
        ({"tolerance": 1}, "exactly one of"),
        ({"any": False}, "may only be true"),
        ({"exact": 1, "bogus": 2}, "Extra inputs"),
    ],
)
def test_bad_matchers_are_rejected(raw: object, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        m(raw)


def test_matcher_round_trips_through_its_dump() -> None:
    matcher = m({"number": 2, "tolerance": 0.5})
    assert ArgMatcher.model_validate(matcher.model_dump()) == matcher


def c(raw: object) -> AnswerCheck:
    return AnswerCheck.model_validate(raw)


@pytest.mark.parametrize(
    ("check", "answer", "ok"),
    [
        ({"exact": "Paris"}, " Paris\n", True),
        ({"exact": "Paris"}, "paris", False),
        ({"exact": "Paris", "case_sensitive": False}, "paris", True),
        ({"contains": "42"}, "The answer is 42.", True),
        ({"contains": "forty"}, "The answer is 42.", False),
        ({"contains": "PARIS", "case_sensitive": False}, "it is paris", True),
        ({"regex": r"\b42\b"}, "it is 42 units", True),
        ({"regex": r"^42$"}, "it is 42", False),
        ({"number": 1234.5, "tolerance": 0.01}, "1,234.5", True),
        ({"number": 42, "tolerance": 0.5}, "about 41.8 kg", True),
        ({"number": 42, "tolerance": 0.5}, "about 40 kg", False),
        ({"json_schema": {"type": "object", "required": ["n"]}}, '{"n": 1}', True),
        ({"json_schema": {"type": "object", "required": ["n"]}}, '{"m": 1}', False),
        ({"json_schema": {"type": "object"}}, "not json", False),
    ],
)
def test_answer_checks(check: object, answer: str, ok: bool) -> None:
    assert c(check).check(answer).ok is ok


def test_contains_says_it_is_a_substring_match() -> None:
    assert c({"contains": "42"}).check("x 42").note == "substring match"


def test_number_extracted_from_text_says_so() -> None:
    assert c({"number": 42}).check("it is 42").note == "number extracted from text"
    assert c({"number": 42}).check("42").note is None


def test_missing_answer_fails_every_check() -> None:
    result = c({"contains": ""}).check(None)
    assert not result.ok and result.reason == "no final answer"


def test_invalid_json_schema_is_rejected() -> None:
    with pytest.raises(ValidationError, match="not a valid schema"):
        c({"json_schema": {"type": "no-such-type"}})


def test_an_optional_matcher_allows_absence_but_not_a_wrong_value() -> None:
    from tracecard.scorers.matchers import ArgMatcher

    matcher = ArgMatcher.model_validate({"one_of": ["units"], "optional": True})
    assert matcher.match(False, None).ok
    assert matcher.match(True, "units").ok
    assert not matcher.match(True, "cm").ok
    assert not ArgMatcher.model_validate({"one_of": ["units"]}).match(False, None).ok
