"""The built-in baselines as `tracecard run --agent builtin:NAME` agent processes on the helpdesk
suite (real helpdesk MCP servers per run, through the proxy): the oracle passes every task, the
null agent fails every task that needs a change; plus the value generators they rely on."""

from __future__ import annotations

import random
import re
from pathlib import Path

import jsonschema
import pytest

from tests.server.test_run_cli import only_experiment, run_tracecard
from tracecard.scorers.matchers import AnswerCheck, ArgMatcher
from tracecard.scorers.suite import load_suite
from tracecard.server.audit.values import answer_for, example_of_regex, random_value, value_for
from tracecard.server.evaluation.service import scorecard_for
from tracecard.traces.store import Store

ROOT = Path(__file__).resolve().parents[2]
HELPDESK = [
    "--config",
    "examples/helpdesk/tracecard.toml",
    "--suite",
    "examples/helpdesk/suite.toml",
]


def _scores(tmp_path: Path, agent: str) -> dict[str, dict[str, bool | None]]:
    db = tmp_path / f"{agent}.db"
    argv = ["tracecard", "run", *HELPDESK, "--name", agent, "--agent", f"builtin:{agent}"]
    extra = ["--db", str(db), "--port", "0", "--work-dir", str(tmp_path / "w"), "--quiet"]
    result = run_tracecard(argv, tmp_path, extra)
    assert result.returncode == 0, result.stderr[-3000:]
    experiment, runs = only_experiment(db)
    assert experiment.config["agent"] == f"builtin:{agent}"
    assert all(run.status == "finished" for run in runs), [(r.task_id, r.error) for r in runs]
    store = Store(f"sqlite:///{db}")
    try:
        card = scorecard_for(store, experiment.id)
    finally:
        store.dispose()
    found = {r.task_id: {c.component: c.passed for c in r.components} for r in card.runs}
    return found


def test_builtin_oracle_passes_every_helpdesk_task(tmp_path: Path) -> None:
    scores = _scores(tmp_path, "oracle")
    assert len(scores) == 10
    failed = {
        task: [c for c, passed in components.items() if passed is False]
        for task, components in scores.items()
    }
    assert failed == {task: [] for task in scores}
    # every task's outcome and completion, where it has one, was evaluated and passed
    suite = load_suite(ROOT / "examples" / "helpdesk" / "suite.toml")
    for task in suite.tasks:
        if task.outcome is not None:
            assert scores[task.id]["outcome"] is True
        if task.completion is not None:
            assert scores[task.id]["completion"] is True


def test_builtin_null_fails_every_task_that_needs_a_change(tmp_path: Path) -> None:
    scores = _scores(tmp_path, "null")
    suite = load_suite(ROOT / "examples" / "helpdesk" / "suite.toml")
    for task in suite.tasks:
        verdicts = scores[task.id]
        assert verdicts.get("outcome") is not True, task.id  # the start state never passes
        assert verdicts.get("completion") is not True, task.id  # no answer
        if task.invocation is not None and not task.invocation.expect_no_calls:
            assert verdicts["invocation"] is False, task.id
    # abstaining is what the one no-tool task asks for
    assert scores["sla-meaning"]["invocation"] is True


def test_a_bad_builtin_name_is_a_usage_error(tmp_path: Path) -> None:
    argv = ["tracecard", "run", *HELPDESK, "--name", "x", "--agent", "builtin:genius"]
    result = run_tracecard(argv, tmp_path, ["--db", str(tmp_path / "x.db"), "--port", "0"])
    assert result.returncode == 2
    assert "builtin:genius: no such built-in agent" in result.stderr
    assert "builtin:null, builtin:oracle, builtin:random-tool" in result.stderr


@pytest.mark.parametrize(
    "pattern",
    [r"(?i)vpn", r"(?i)service[- ]level agreement", r"^T-\d{4}$", r"a|b", r"[^abc]+x", r"\bfoo\b"],
)
def test_regex_examples_match_their_pattern(pattern: str) -> None:
    example = example_of_regex(pattern)
    assert example is not None and re.search(pattern, example)


def test_a_regex_matcher_prefers_the_value_the_task_looks_for() -> None:
    matcher = ArgMatcher.model_validate({"regex": "(?i)vpn"})
    rng = random.Random(0)
    assert value_for(matcher, None, rng, ["closed", "VPN"]) == (True, "VPN")
    schema = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}
    spam = ArgMatcher.model_validate({"regex": "spam"})
    assert value_for(spam, schema, rng, ["spam"]) == (True, ["spam"])
    optional = ArgMatcher.model_validate({"exact": 1, "optional": True})
    assert value_for(optional, None, rng) == (False, None)


def test_answers_pass_the_checks_they_were_built_for() -> None:
    checks = [
        AnswerCheck.model_validate(c)
        for c in ({"regex": "(?i)reopened"}, {"contains": "T-1006"}, {"number": 3})
    ]
    answer = answer_for(checks, random.Random(0))
    assert all(check.check(answer).ok for check in checks)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    as_json = [AnswerCheck.model_validate({"json_schema": schema})]
    assert as_json[0].check(answer_for(as_json, random.Random(1))).ok
    assert answer_for([], random.Random(0)) is None


def test_random_values_are_valid_under_their_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "count": {"type": "integer", "minimum": 1, "maximum": 9},
            "ratio": {"type": "number"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
            "mode": {"enum": ["fast", "slow"]},
            "nested": {"type": "object", "properties": {"on": {"type": "boolean"}}},
        },
        "required": ["name", "count", "mode"],
    }
    rng = random.Random(7)
    for _ in range(200):
        value = random_value(schema, rng)
        jsonschema.validate(value, schema)
        assert {"name", "count", "mode"} <= set(value)
