from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tracecard.scorers import SuiteError, load_suite, parse_suite, suite_version

ROOT = Path(__file__).resolve().parents[2]

GOOD = """schema_version = 1
name = "demo"

[[tasks]]
id = "a"
instruction = "read the notes"

[tasks.invocation]
[[tasks.invocation.calls]]
tool = "read_file"
arguments = { path = { regex = "notes" } }

[[tasks]]
id = "b"
instruction = "write the report"
"""


def error_of(text: str, fmt: str = "toml", name: str = "suite.toml") -> SuiteError:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, fmt, name)  # type: ignore[arg-type]
    return caught.value


def test_a_good_suite_parses() -> None:
    suite = parse_suite(GOOD, "toml", "suite.toml")
    assert [t.id for t in suite.tasks] == ["a", "b"]
    assert suite.task("b").invocation is None


def test_unknown_field_names_file_line_path_and_reason() -> None:
    text = GOOD.replace('tool = "read_file"', 'tool = "read_file"\ntimeout = 3')
    message = str(error_of(text))
    assert message == "suite.toml:11: tasks[0].invocation.calls[0].timeout: unknown field"


def test_bad_regex_names_the_argument() -> None:
    text = GOOD.replace('regex = "notes"', 'regex = "notes("')
    message = str(error_of(text))
    assert message.startswith("suite.toml:11: tasks[0].invocation.calls[0].arguments.path: ")
    assert "regex does not compile" in message


def test_wrong_type() -> None:
    text = GOOD.replace('id = "b"', "id = 7")
    message = str(error_of(text))
    assert message.startswith("suite.toml:14: tasks[1].id: ")
    assert "string" in message


def test_duplicate_task_ids() -> None:
    error = error_of(GOOD.replace('id = "b"', 'id = "a"'))
    assert str(error) == "suite.toml:14: tasks[1].id: duplicate task id 'a' (first at tasks[0])"


def test_every_problem_is_reported() -> None:
    text = GOOD.replace('id = "b"', 'id = "b"\ncolour = 1').replace(
        'regex = "notes"', 'regex = "("'
    )
    assert len(error_of(text).issues) == 2


def test_json_errors_carry_lines_too() -> None:
    document = json.dumps(tomllib.loads(GOOD), indent=2).replace('"tool"', '"tol"')
    issues = {i.path: i for i in error_of(document, "json", "suite.json").issues}
    unknown = issues["tasks[0].invocation.calls[0].tol"]
    assert unknown.reason == "unknown field" and unknown.source == "suite.json"
    assert unknown.line is not None and '"tol"' in document.splitlines()[unknown.line - 1]
    assert issues["tasks[0].invocation.calls[0].tool"].reason == "required field is missing"


def test_syntax_errors() -> None:
    assert "not valid TOML" in str(error_of("name = ", name="x.toml"))
    assert str(error_of('{"a": }', "json", "x.json")).startswith("x.json:1: not valid JSON")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("schema_version = 1", "schema_version = 9"), "schema version 9 is not supported"),
        (("schema_version = 1\n", ""), "schema_version: required integer"),
    ],
)
def test_schema_version_is_required_and_known(change: tuple[str, str], reason: str) -> None:
    assert reason in str(error_of(GOOD.replace(*change)))


def test_predicates_must_name_a_probe() -> None:
    text = GOOD + (
        '[tasks.outcome]\nprobes = [{ id = "f", path = "x.txt" }]\n'
        'predicates = [{ probe = "g", op = "exists" }]\n'
    )
    assert "tasks[1].outcome.predicates[0].probe: unknown probe 'g'" in str(error_of(text))


def test_file_probes_must_stay_relative() -> None:
    text = GOOD + (
        '[tasks.outcome]\nprobes = [{ id = "f", path = "/etc/passwd" }]\n'
        'predicates = [{ probe = "f", op = "exists" }]\n'
    )
    assert "tasks[1].outcome.probes[0].path: " in str(error_of(text))


def test_version_is_stable_across_toml_and_json() -> None:
    suite = parse_suite(GOOD, "toml")
    as_json = parse_suite(json.dumps(tomllib.loads(GOOD)), "json")
    assert suite_version(suite) == suite_version(as_json)
    assert len(suite_version(suite)) == 64
    changed = parse_suite(GOOD.replace("read the notes", "read the notes!"), "toml")
    assert suite_version(changed) != suite_version(suite)


def _doc_examples() -> list[tuple[str, str]]:
    docs = (ROOT / "docs" / "suites.md").read_text()
    blocks = re.findall(r"```(toml|json)\n(.*?)```", docs, re.S)
    return [(fmt, body) for fmt, body in blocks if "schema_version" in body]


def test_docs_contain_examples() -> None:
    assert _doc_examples(), "docs/suites.md has no complete suite example"


@pytest.mark.parametrize(("fmt", "body"), _doc_examples())
def test_every_example_in_the_docs_loads(fmt: str, body: str) -> None:
    parse_suite(body, fmt, "docs/suites.md")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "examples" / "suites").glob("*.*")), ids=lambda p: p.name
)
def test_every_example_suite_loads(path: Path) -> None:
    assert load_suite(path).tasks


def test_basic_example_covers_every_component() -> None:
    suite = load_suite(ROOT / "examples" / "suites" / "basic.toml")
    assert any(t.invocation for t in suite.tasks)
    assert any(t.invocation and t.invocation.expect_no_calls for t in suite.tasks)
    assert any(t.completion for t in suite.tasks)
    assert any(t.outcome for t in suite.tasks)
    assert any(t.safety.rules for t in suite.tasks)
    assert any(t.efficiency.optimal_calls is not None for t in suite.tasks)
    kinds = {p.kind for t in suite.tasks if t.outcome for p in t.outcome.probes}
    assert kinds == {"tool", "http", "file"}


def test_unreadable_file(tmp_path: Path) -> None:
    # #14.11: worded as a missing config file is, with the path as given and no errno
    with pytest.raises(SuiteError) as missing:
        load_suite(tmp_path / "missing.toml")
    assert str(missing.value) == f"{tmp_path / 'missing.toml'}: no such suite file"
    with pytest.raises(SuiteError) as folder:
        load_suite(tmp_path)
    assert str(folder.value) == f"{tmp_path}: cannot read: Is a directory"
