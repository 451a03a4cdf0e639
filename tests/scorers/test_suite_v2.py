"""Suite schema version 2: turns, round trips through TOML and JSON, errors for bad turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecard.scorers import SuiteError, dump_suite, load_suite, parse_suite, suite_version

ROOT = Path(__file__).resolve().parents[2]

V2 = """schema_version = 2
name = "mt"

[[tasks]]
id = "files"
instruction = "You manage a virtual file system."
upstreams = ["fs"]

[[tasks.turns]]
user = "make a directory called temp"
[[tasks.turns.invocation.calls]]
tool = "mkdir"
arguments = { dir_name = "temp" }
result = { regex = "^$" }

[[tasks.turns]]
user = "thanks, nothing else"
invocation = { expect_no_calls = true }

[tasks.turns.outcome]
probes = [{ id = "state", upstream = "fs", tool = "bfcl_state" }]

[[tasks.turns.outcome.predicates]]
probe = "state"
path = "$.cwd"
op = "eq"
value = { "$null" = true }

[[tasks.turns.outcome.predicates]]
probe = "state"
path = "$.tree"
op = "eq"
value = { temp = { a = [1, { "$null" = true }] } }
"""


def error_lines(text: str, fmt: str = "toml") -> list[str]:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, fmt, "suite.toml")  # type: ignore[arg-type]
    return [str(issue) for issue in caught.value.issues]


def test_turns_parse_with_their_expectations() -> None:
    task = parse_suite(V2, "toml", "suite.toml").tasks[0]
    assert task.multi_turn and [t.user for t in task.turns][1] == "thanks, nothing else"
    first, second = task.turns
    assert first.invocation is not None and first.invocation.calls[0].result is not None
    assert second.invocation is not None and second.invocation.expect_no_calls
    assert second.outcome is not None
    predicates = second.outcome.predicates
    assert predicates[0].value is None  # the TOML null convention
    assert predicates[1].value == {"temp": {"a": [1, None]}}


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_round_trip_keeps_the_suite_and_its_version(fmt: str) -> None:
    suite = parse_suite(V2, "toml", "suite.toml")
    text = dump_suite(suite, fmt)  # type: ignore[arg-type]
    again = parse_suite(text, fmt, f"suite.{fmt}")  # type: ignore[arg-type]
    assert again == suite
    assert suite_version(again) == suite_version(suite)
    if fmt == "json":
        assert json.loads(text)["tasks"][0]["turns"][1]["outcome"]["predicates"][0]["value"] is None
    else:
        assert '"$null" = true' in text


def test_json_writes_null_as_null_and_means_the_same_suite() -> None:
    suite = parse_suite(V2, "toml", "suite.toml")
    document = json.loads(dump_suite(suite, "json"))
    assert suite_version(parse_suite(json.dumps(document), "json")) == suite_version(suite)


def test_version_1_files_keep_loading_with_their_old_version() -> None:
    basic = load_suite(ROOT / "examples" / "suites" / "basic.toml")
    assert basic.schema_version == 1 and not any(t.turns for t in basic.tasks)
    # An unchanged v1 suite hashes as before turns existed (no `turns` key in its canonical form).
    assert "turns" not in json.dumps(
        [t.model_dump(mode="json", exclude_defaults=True) for t in basic.tasks]
    )
    assert parse_suite(dump_suite(basic, "toml"), "toml") == basic


def test_turns_in_a_version_1_file_say_what_to_change() -> None:
    assert error_lines(V2.replace("schema_version = 2", "schema_version = 1")) == [
        "suite.toml:9: tasks[0].turns: turns need schema_version = 2"
    ]


def test_bad_turns_name_file_line_and_field() -> None:
    text = V2.replace('user = "thanks, nothing else"', 'usr = "thanks"')
    assert error_lines(text) == [
        "suite.toml:16: tasks[0].turns[1].user: required field is missing",
        "suite.toml:17: tasks[0].turns[1].usr: unknown field",
    ]
    wrong_kind = V2.replace('user = "make a directory called temp"', "user = 3")
    (line,) = error_lines(wrong_kind)
    assert line.startswith("suite.toml:10: tasks[0].turns[0].user: ") and "string" in line


def test_a_turn_predicate_must_name_a_probe_of_its_own_turn() -> None:
    text = V2.replace('probe = "state"\npath = "$.cwd"', 'probe = "other"\npath = "$.cwd"')
    assert error_lines(text) == [
        "suite.toml:24: tasks[0].turns[1].outcome.predicates[0].probe: unknown probe 'other'"
    ]


def test_a_task_needs_an_instruction_or_turns() -> None:
    text = 'schema_version = 2\nname = "x"\n\n[[tasks]]\nid = "a"\n'
    assert error_lines(text) == ["suite.toml:4: tasks[0].instruction: give an instruction or turns"]


def test_per_turn_and_task_level_invocation_do_not_mix() -> None:
    text = V2 + '\n[tasks.invocation]\ncalls = [{ tool = "ls" }]\n'
    (line,) = error_lines(text)
    assert "give invocation per turn or for the task, not both" in line
