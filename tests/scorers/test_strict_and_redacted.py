"""`strict = true` on exact/one_of/eq (and as a suite default), and matching redacted values."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from tracecard.scorers import parse_suite, score_invocation, score_outcome
from tracecard.traces.secrets import fingerprint

from .trace_helpers import FINISHED, make_task, probe_span, tool_call

KEY = b"s" * 32
WITH_KEY = dataclasses.replace(FINISHED, fingerprint=functools.partial(fingerprint, KEY))


def _city_task(matcher: str, preamble: str = "") -> str:
    return (
        f'schema_version = 1\nname = "s"\n{preamble}\n[[tasks]]\nid = "t"\ninstruction = "x"\n'
        f'[[tasks.invocation.calls]]\ntool = "book"\narguments = {{ city = {matcher} }}\n'
    )


@pytest.mark.parametrize(
    ("matcher", "sent", "value"),
    [
        ('"Paris"', "Paris ", 1.0),  # normalised by default
        ('{ exact = "Paris", strict = true }', "Paris ", 0.0),
        ('{ exact = "Paris", strict = true }', "Paris", 1.0),
        ("{ exact = 1, strict = true }", 1.0, 0.0),
        ("{ exact = 1 }", 1.0, 1.0),
        ('{ one_of = ["Paris", "Rome"], strict = true }', " Rome", 0.0),
    ],
)
def test_strict_exact_and_one_of(matcher: str, sent: object, value: float) -> None:
    task = parse_suite(_city_task(matcher), "toml").tasks[0]
    score = score_invocation(task, [tool_call("book", {"city": sent})], FINISHED)
    assert score.value == value, score.evidence


def test_a_suite_level_strict_default_and_its_override() -> None:
    strict = parse_suite(_city_task('"Paris"', "strict = true"), "toml").tasks[0]
    loose = parse_suite(_city_task('{ exact = "Paris", strict = false }', "strict = true"), "toml")
    call = [tool_call("book", {"city": "Paris "})]
    assert score_invocation(strict, call, FINISHED).value == 0.0
    assert score_invocation(loose.tasks[0], call, FINISHED).value == 1.0


def test_strict_is_refused_where_it_means_nothing() -> None:
    with pytest.raises(ValueError, match="strict"):
        parse_suite(_city_task('{ regex = "^P", strict = true }'), "toml")


def test_strict_eq_on_probe_values() -> None:
    body = """
[tasks.outcome]
probes = [{{ id = "f", path = "a.json" }}]
predicates = [{{ probe = "f", path = "$.city", op = "eq", value = "Paris"{strict} }}]
"""
    observed = [probe_span("f", {"city": "Paris "})]
    assert score_outcome(make_task(body.format(strict="")), observed, FINISHED).value == 1.0
    strict = make_task(body.format(strict=", strict = true"))
    assert score_outcome(strict, observed, FINISHED).value == 0.0


def test_a_redacted_argument_matches_by_fingerprint_only_with_the_key() -> None:
    task = parse_suite(_city_task('"abc123token"'), "toml").tasks[0]
    stored = [tool_call("book", {"city": fingerprint(KEY, "abc123token")})]
    assert score_invocation(task, stored, WITH_KEY).value == 1.0
    other = [tool_call("book", {"city": fingerprint(KEY, "another")})]
    assert score_invocation(task, other, WITH_KEY).value == 0.0
    forged = [tool_call("book", {"city": fingerprint(b"guess" * 7, "abc123token")})]
    assert score_invocation(task, forged, WITH_KEY).value == 0.0
    unknown = score_invocation(task, stored, FINISHED)  # no key: cannot compare
    assert unknown.value is None and "could not be judged" in unknown.evidence["reason"]


def test_number_on_a_redacted_argument_is_not_evaluated() -> None:
    task = parse_suite(_city_task("{ number = 3 }"), "toml").tasks[0]
    score = score_invocation(task, [tool_call("book", {"city": fingerprint(KEY, "3")})], WITH_KEY)
    assert score.value is None and score.passed is None
    assert "a number check cannot be evaluated" in str(score.evidence)
