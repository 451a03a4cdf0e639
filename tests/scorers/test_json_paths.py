"""#14.14: JSON paths beyond the simple ones (RFC 9535 via python-jsonpath), so that "an entity
named Ada exists" can be written, and a wrong state still fails."""

from __future__ import annotations

import pytest

from tracecard.scorers import evaluate_predicate, parse_suite
from tracecard.scorers._json import JsonPath, JsonPathError
from tracecard.scorers.spec import Predicate

STATE = {"entities": [{"name": "Bob", "age": 40}, {"name": "Ada", "age": 36}], "odd key": 1}
WRONG = {"entities": [{"name": "Bob", "age": 40}, {"name": "Adam", "age": 20}]}


def test_simple_paths_keep_the_fast_path() -> None:
    path = JsonPath.parse("$.entities[1].name")
    assert path.query is None and path.steps == ("entities", 1, "name")
    assert path.resolve(STATE) == (True, "Ada")
    assert JsonPath.parse("$['odd key']").resolve(STATE) == (True, 1)
    assert JsonPath.parse("entities[5]").resolve(STATE) == (False, None)


@pytest.mark.parametrize(
    ("path", "nodes"),
    [
        ("$.entities[*].name", ["Bob", "Ada"]),
        ("entities[*].name", ["Bob", "Ada"]),
        ("$..name", ["Bob", "Ada"]),
        ("$.entities[?@.name == 'Ada']", [{"name": "Ada", "age": 36}]),
        ("$.entities[?@.age < 38].name", ["Ada"]),
    ],
)
def test_queries_select_every_matching_node(path: str, nodes: list[object]) -> None:
    parsed = JsonPath.parse(path)
    assert parsed.query is not None
    assert parsed.resolve(STATE) == (True, nodes)


def test_an_entity_named_ada_exists_and_a_wrong_state_fails() -> None:
    exists = Predicate(probe="p", path="$.entities[?@.name == 'Ada']", op="exists")
    names = Predicate(probe="p", path="entities[*].name", op="contains", value="Ada")
    for predicate in (exists, names):
        assert evaluate_predicate(predicate, STATE).ok
        assert not evaluate_predicate(predicate, WRONG).ok  # "Adam" is not "Ada"
    absent = Predicate(probe="p", path="$.entities[?@.name == 'Ada']", op="absent")
    assert evaluate_predicate(absent, WRONG).ok and not evaluate_predicate(absent, STATE).ok


def test_a_bad_path_is_a_located_suite_error() -> None:
    with pytest.raises(JsonPathError, match="cannot parse JSON path"):
        JsonPath.parse("$.entities[?@.name ==]")
    suite = """schema_version = 1
name = "x"
[[tasks]]
id = "t"
instruction = "i"
[tasks.outcome]
probes = [{ id = "p", path = "state.json" }]
predicates = [{ probe = "p", path = "$.entities[?@.name ==]", op = "exists" }]
"""
    with pytest.raises(ValueError, match=r"s\.toml:8: tasks\[0\]\.outcome\.predicates\[0\]\.path"):
        parse_suite(suite, "toml", "s.toml")
