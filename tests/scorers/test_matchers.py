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


@pytest.mark.parametrize(
    ("matcher", "actual", "ok"),
    [
        # BFCL's standardisation: spaces and ,./-_*^ removed, lower case, ' read as "
        ({"one_of": ["Taylor Swift"], "normalize": "bfcl"}, "taylor swift", True),
        ({"one_of": ["New York, NY"], "normalize": "bfcl"}, "New York NY", True),
        ({"one_of": ["2024-04-01"], "normalize": "bfcl"}, "2024/04/01", True),
        ({"one_of": ["it's"], "normalize": "bfcl"}, 'IT"S', True),
        ({"one_of": ["Taylor Swift"], "normalize": "bfcl"}, "Taylor\tSwift", False),  # a tab
        ({"one_of": ["Paris"], "normalize": "bfcl"}, "Paris!", False),  # ! is not removed
        ({"one_of": ["Paris"], "normalize": "bfcl"}, "Pariss", False),
        # in a list: its strings; in an object: its string values; deeper: as written
        ({"one_of": [["New York", 2]], "normalize": "bfcl"}, ["new york", 2.0], True),
        ({"one_of": [{"city": "New York"}], "normalize": "bfcl"}, {"city": "NEW-YORK"}, True),
        ({"one_of": [[["New York"]]], "normalize": "bfcl"}, [["new york"]], False),
        # Python's ==: no trimming, 2 == 2.0, true == 1
        ({"exact": "Paris", "normalize": "python"}, "Paris ", False),
        ({"exact": 2, "normalize": "python"}, 2.0, True),
        ({"exact": 1, "normalize": "python"}, True, True),
        ({"exact": {"$map": [[2, "a"]]}, "normalize": "python"}, {"$map": [[2.0, "a"]]}, True),
        ({"exact": {"$map": [[2, "a"]]}, "normalize": "python"}, {"2": "a"}, False),
        ({"exact": {"$set": [1, 2]}, "normalize": "python"}, {"$set": [2, 1]}, True),
        ({"exact": {"$tuple": [1, 2]}, "normalize": "python"}, [1, 2], False),
        # types: integer is not float, number is either, booleans are neither
        ({"one_of": [2], "normalize": "python", "type": "integer"}, 2, True),
        ({"one_of": [2], "normalize": "python", "type": "integer"}, 2.0, False),
        ({"one_of": [2], "normalize": "python", "type": "integer"}, True, False),
        ({"one_of": [2.0], "normalize": "python", "type": "number"}, 2, True),
        ({"one_of": [2.0], "normalize": "python", "type": "float"}, 2, False),
        ({"one_of": [True], "normalize": "python", "type": "boolean"}, "true", False),
        ({"one_of": ["5"], "normalize": "bfcl", "type": "string"}, 5, False),
        ({"any": True, "type": ["string", "null"]}, None, True),
        ({"one_of": [[1.5, 2.0]], "type": "array", "items": "float"}, [1.5, 2], False),
        ({"one_of": [[1.5, 2.0]], "type": "array", "items": "number"}, [1.5, 2], True),
    ],
)
def test_normalize_and_types(matcher: object, actual: object, ok: bool) -> None:
    result = m(matcher).match(True, actual)
    assert result.ok is ok, result.reason


def test_a_wrong_type_says_what_it_got() -> None:
    result = m({"one_of": [2], "type": "integer"}).match(True, 2.0)
    assert result.reason == "expected type integer, got float"
    result = m({"one_of": [[1]], "type": "array", "items": "integer"}).match(True, [1, "2"])
    assert result.reason == "item 1: expected type integer, got string"
    assert m({"one_of": [2], "type": "integer", "optional": True}).match(False, None).ok


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"one_of": [3], "normalize": "bfcl"}, 'normalize = "bfcl" } standardises strings'),
        ({"exact": None, "normalize": "bfcl"}, "None is null, not a string"),
        ({"regex": "a", "normalize": "python"}, "`normalize` applies to exact and one_of"),
        ({"exact": "a", "normalize": "python", "strict": True}, "not both"),
        ({"exact": "a", "normalize": "lower"}, "normalize"),
        ({"exact": 1, "type": "int"}, "type"),
        ({"exact": 1, "type": []}, "`type` needs at least one"),
    ],
)
def test_bad_normalize_or_type(raw: object, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        m(raw)


def test_the_bfcl_matcher_on_a_number_is_a_suite_error_naming_task_and_argument() -> None:
    from tracecard.scorers import SuiteError, parse_suite

    text = """schema_version = 2
name = "s"
[[tasks]]
id = "weather"
instruction = "How warm will it be?"
upstreams = ["u"]
[tasks.invocation]
calls = [{ tool = "forecast", arguments = { days = { one_of = [3], normalize = "bfcl" } } }]
"""
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, "toml", "s.toml")
    message = str(caught.value)
    assert message.startswith("s.toml:8: tasks[0].invocation.calls[0].arguments.days: ")
    assert "task 'weather', argument 'days': { one_of, normalize = \"bfcl\" }" in message
    assert "3 is integer, not a string" in message


def test_a_python_predicate_compares_as_python_does() -> None:
    from tracecard.scorers import evaluate_predicate
    from tracecard.scorers.spec import Predicate

    def holds(value: object, observed: object, normalize: str = "python") -> bool:
        predicate = Predicate(probe="p", path="$.s", op="eq", value=value, normalize=normalize)
        return evaluate_predicate(predicate, {"s": observed}).ok

    assert not holds({"body": "hi"}, {"body": "hi "})  # no trimming
    assert holds({"body": "hi"}, {"body": "hi "}, "default")  # the default trims
    assert holds({"$map": [[2, ["c"]]]}, {"$map": [[2.0, ["c"]]]})  # 2.0 == 2 as a key
    assert not holds({"$map": [[2, ["c"]]]}, {"2": ["c"]})
    with pytest.raises(ValidationError, match="`normalize` applies to op 'eq' only"):
        Predicate(probe="p", op="contains", value="x", normalize="python")
