from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tracecard.scorers import (
    ComponentScore,
    ScorecardFormatError,
    build_scorecard,
    gate,
    load_suite,
    pass_at_k,
    read_scorecard_json,
    suite_version,
    to_csv,
    to_json,
    to_junit,
    to_markdown,
)
from tracecard.scorers.scorecard import Scorecard

ROOT = Path(__file__).resolve().parents[2]
SUITE = load_suite(ROOT / "examples" / "suites" / "basic.toml")


def cs(component: str, passed: bool | None, value: float | None = None) -> dict[str, Any]:
    if value is None and passed is not None:
        value = 1.0 if passed else 0.0
    return ComponentScore(
        component=component, value=value, passed=passed, scorer=component, version="1"
    ).model_dump()


def run(
    task: str, trial: int, outcome: bool | None, flags: list[str] | None = None
) -> dict[str, Any]:
    return {
        "run_id": f"{task}-{trial}",
        "task_id": task,
        "trial": trial,
        "status": "finished",
        "final_answer": "3 | <b>",
        "components": [cs("outcome", outcome), cs("safety", True)],
        "flags": flags or [],
    }


RUNS = [
    run("read-notes", 0, True),
    run("read-notes", 1, False, ["hallucinated_completion"]),
    run("read-notes", 2, True),
    run("write-report", 0, True),
    run("write-report", 1, True),
    run("write-report", 2, True),
]
VERDICTS = [
    {"run_id": "read-notes-1", "component": "outcome", "agree": False, "note": "n", "author": "a"},
    {"run_id": "read-notes-0", "component": "outcome", "agree": True},
]


@pytest.fixture
def card() -> Scorecard:
    return build_scorecard(
        SUITE, {"id": "exp-1", "config": {"name": "gpt | <x>"}}, RUNS, VERDICTS, resamples=300
    )


def test_per_task_component_statistics(card: Scorecard) -> None:
    task = card.task("read-notes")
    assert task is not None and task.runs == 3
    stats = task.component("outcome")
    assert stats is not None
    assert (stats.n, stats.passes, stats.flip) == (3, 2, True)
    assert stats.pass_rate == pytest.approx(2 / 3)
    assert stats.pass_at_k == {k: pytest.approx(pass_at_k(3, 2, k)) for k in (1, 2, 3)}
    assert stats.pass_hat_k[3] == 0.0
    missing = card.task("abstain-delete")
    assert missing is not None and missing.runs == 0 and missing.components == []


def test_per_component_summary_and_flags(card: Scorecard) -> None:
    outcome = card.summary("outcome")
    assert outcome is not None and outcome.n_tasks == 2
    # every named statistic is a mean over tasks with its interval
    assert outcome.pass_rate.value == pytest.approx((2 / 3 + 1) / 2)
    assert outcome.mean.value == pytest.approx((2 / 3 + 1) / 2)
    low, high = outcome.pass_rate.low, outcome.pass_rate.high
    assert low is not None and high is not None and low <= outcome.pass_rate.value <= high
    assert outcome.pass_at_k[1] == outcome.pass_rate
    assert outcome.pass_hat_k[3].value == pytest.approx((0 + 1) / 2)
    assert outcome.pass_at_k[2].value == pytest.approx((1 + 1) / 2)
    assert outcome.flip.value == 0.5 and outcome.flip.n_tasks == 2
    assert card.flags == {"hallucinated_completion": 1}
    assert card.suite.version == suite_version(SUITE)


def test_agreement_rate_per_scorer(card: Scorecard) -> None:
    assert [(a.scorer, a.n, a.agree, a.rate) for a in card.agreement] == [("outcome", 2, 1, 0.5)]


def test_unevaluated_runs_do_not_count_as_passes() -> None:
    runs = [run("read-notes", 0, None), run("read-notes", 1, True)]
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, runs, resamples=10)
    stats = card.task("read-notes").component("outcome")  # type: ignore[union-attr]
    assert stats is not None and (stats.n, stats.evaluated, stats.passes) == (2, 1, 1)


def test_runs_of_unknown_tasks_are_rejected() -> None:
    with pytest.raises(ValueError, match="not in suite"):
        build_scorecard(SUITE, {"id": "e", "config": {}}, [run("nope", 0, True)])


def test_json_round_trip(card: Scorecard) -> None:
    document = json.loads(to_json(card))
    assert document["schema_version"] == 3
    assert document["runs"][0]["attempt"] is None and "infra" not in document
    assert document["components"][0]["pass_rate"]["value"] == pytest.approx(5 / 6)
    assert document["runs"][0]["viewer_url"] == "/runs/read-notes-0"
    assert document["runs"][1]["verdict"] == "failed"
    assert document["tasks"][0]["components"][0]["pass_at_k"]["1"] == pytest.approx(2 / 3)
    assert read_scorecard_json(to_json(card)) == card


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b"{", "not valid JSON"),
        (b"[]", "must be an object"),
        (b'{"schema_version": 99}', "schema_version 99 is not supported"),
        (b'{"schema_version": 1}', "wrong shape"),
        (b'{"schema_version": 2}', "wrong shape"),
        (b'{"schema_version": 3}', "wrong shape"),
    ],
)
def test_json_reader_rejects(text: bytes, reason: str) -> None:
    with pytest.raises(ScorecardFormatError, match=reason):
        read_scorecard_json(text)


def test_v2_scorecards_are_still_read(card: Scorecard) -> None:
    """Schema 2 had no run `attempt` and no `infra`: it reads as before, without them."""
    old = json.loads(to_json(card))
    old["schema_version"] = 2
    for row in old["runs"]:
        del row["attempt"]
    read = read_scorecard_json(json.dumps(old))
    assert read.schema_version == 3 and read.infra is None  # read into the current model
    assert read.runs == card.runs  # `attempt` is None in both


def test_v1_scorecards_are_still_read(card: Scorecard) -> None:
    """A schema-1 document (flat `mean`/`low`/`high`/`pass_rate`/`flip_rate`, a task's
    `mean_value`) reads into the current model, pass@k / pass^k recomputed from the tasks."""
    old = json.loads(to_json(card))
    old["schema_version"] = 1
    old["components"] = [
        {
            "component": "outcome",
            "mean": 0.8,
            "low": 0.6,
            "high": 1.0,
            "n_tasks": 2,
            "pass_rate": 0.83,
            "flip_rate": 0.5,
        },
    ]
    for task in old["tasks"]:
        for stats in task["components"]:
            stats["mean_value"] = stats.pop("mean")
    for row in old["runs"]:
        for key in ("verdict", "first_failure", "viewer_url", "calls"):
            row.pop(key, None)
    read = read_scorecard_json(json.dumps(old))
    outcome = read.summary("outcome")
    assert outcome is not None and read.schema_version == 3  # read into the current model
    assert (outcome.mean.value, outcome.mean.low, outcome.mean.high) == (0.8, 0.6, 1.0)
    assert outcome.pass_rate.value == 0.83 and outcome.flip.value == 0.5
    assert outcome.pass_hat_k[3].value == pytest.approx(0.5)
    assert read.task("read-notes").component("outcome").mean == pytest.approx(2 / 3)  # type: ignore[union-attr]


def test_csv_one_row_per_run_and_component(card: Scorecard) -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(card, "http://ci:7800"))))
    assert len(rows) == len(RUNS) * 2
    first = rows[0]
    assert first["task_id"] == "read-notes" and first["component"] == "outcome"
    assert first["scorer_version"] == "1" and first["passed"] == "true"
    assert first["meta.difficulty"] == "easy" and first["config"] == "gpt | <x>"
    assert (
        first["verdict"] == "passed" and first["viewer_url"] == "http://ci:7800/runs/read-notes-0"
    )
    assert rows[2]["flags"] == "hallucinated_completion"
    assert rows[2]["verdict"] == "failed"
    assert rows[2]["first_failure"] == "outcome: failed (see the evidence)"  # the runs list's words


def test_markdown_tables_escape_cells(card: Scorecard) -> None:
    md = to_markdown(card)
    assert "| component | pass_rate | mean | pass@3 | pass^3 | flip | tasks |" in md
    assert "| outcome | 0.83 [0.67, 1.00] | 0.83 [0.67, 1.00] | 1.00 [1.00, 1.00] | 0.50 " in md
    assert "| read-notes | 0.67 2/3 ⇄ · mean 0.67 | 1.00 3/3 · mean 1.00 |" in md
    assert "| hallucinated_completion | 1 |" in md
    assert "gpt \\| &lt;x&gt;" in md and "<x>" not in md


def test_junit_one_testcase_per_task_and_component(card: Scorecard) -> None:
    root = ET.fromstring(to_junit(card, "http://ci:7800"))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "6" and suite.get("failures") == "1"
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    failure = cases[("basic.read-notes", "outcome")].find("failure")
    assert failure is not None and failure.get("message") == "outcome pass_rate 0.67 (2/3 passed)"
    assert "- run read-notes-1 (trial 1, finished): failed" in (failure.text or "")
    assert "http://ci:7800/runs/read-notes-1" in (failure.text or "")
    assert cases[("basic.write-report", "outcome")].find("failure") is None
    assert cases[("basic.abstain-delete", "outcome")].find("skipped") is not None


def test_junit_survives_hostile_text() -> None:
    card = build_scorecard(SUITE, {"id": 'x"<&\x00', "config": {}}, RUNS, resamples=10)
    root = ET.fromstring(to_junit(card))
    assert root.find("testsuite").get("name").startswith('basic[x"<&')  # type: ignore[union-attr]


def test_gate_thresholds(card: Scorecard) -> None:
    passed = gate(card, {"outcome": 0.8, "safety": 1.0})
    assert passed.passed
    assert [c.message for c in passed.checks] == [
        "outcome pass_rate 0.83 >= 0.80",
        "safety pass_rate 1.00 >= 1.00",
    ]
    failed = gate(card, {"outcome": 0.9, "completion": 0.1, "outcome.pass^3": 0.6})
    assert not failed.passed
    assert failed.failures == [
        "outcome pass_rate 0.83 < 0.90",
        "completion pass_rate: not evaluated (threshold 0.10)",
        "outcome pass^3 0.50 < 0.60",
    ]


def test_composite_values_show_without_pass_counts() -> None:
    runs = [run("read-notes", 0, True)]
    runs[0]["components"].append(cs("composite", None, 0.4))
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, runs, resamples=10)
    assert (
        "| read-notes | 1.00 1/1 · mean 1.00 | 1.00 1/1 · mean 1.00 | mean 0.40 |"
        in to_markdown(card)
    )
    cases = ET.fromstring(to_junit(card)).findall("testsuite/testcase")
    composite = next(c for c in cases if c.get("name") == "composite")
    assert composite.find("skipped").get("message") == "mean 0.40, no pass/fail"  # type: ignore[union-attr]


def test_null_scores_are_marked_not_evaluated() -> None:
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, [run("read-notes", 0, None)])
    assert "| read-notes | n/e | 1.00 1/1 · mean 1.00 |" in to_markdown(card)
    case = ET.fromstring(to_junit(card)).find("testsuite/testcase")
    assert case is not None and case.get("name") == "outcome"
    assert case.find("skipped").get("message") == "not evaluated (no pass/fail)"  # type: ignore[union-attr]


def test_one_task_has_no_interval_not_a_zero_width_one() -> None:
    runs = [run("read-notes", t, p) for t, p in enumerate([True, False, True])]
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, runs, resamples=50)
    outcome = card.summary("outcome")
    assert outcome is not None and outcome.n_tasks == 1
    assert outcome.mean.value == pytest.approx(2 / 3)
    for stat in (outcome.mean, outcome.pass_rate, outcome.flip, outcome.pass_hat_k[3]):
        assert (stat.low, stat.high) == (None, None)  # "not available", never [0.67, 0.67]
    assert "[0.67, 0.67]" not in to_markdown(card)
