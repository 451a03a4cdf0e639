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
    assert outcome is not None
    assert outcome.mean == pytest.approx((2 / 3 + 1) / 2) and outcome.n_tasks == 2
    assert outcome.low is not None and outcome.high is not None
    assert outcome.low <= outcome.mean <= outcome.high
    assert outcome.flip_rate == 0.5
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
    assert document["schema_version"] == 1
    assert document["tasks"][0]["components"][0]["pass_at_k"]["1"] == pytest.approx(2 / 3)
    assert read_scorecard_json(to_json(card)) == card


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b"{", "not valid JSON"),
        (b"[]", "must be an object"),
        (b'{"schema_version": 99}', "schema_version 99 is not supported"),
        (b'{"schema_version": 1}', "wrong shape"),
    ],
)
def test_json_reader_rejects(text: bytes, reason: str) -> None:
    with pytest.raises(ScorecardFormatError, match=reason):
        read_scorecard_json(text)


def test_csv_one_row_per_run_and_component(card: Scorecard) -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(card))))
    assert len(rows) == len(RUNS) * 2
    first = rows[0]
    assert first["task_id"] == "read-notes" and first["component"] == "outcome"
    assert first["scorer_version"] == "1" and first["passed"] == "true"
    assert first["meta.difficulty"] == "easy" and first["config"] == "gpt | <x>"
    assert rows[2]["flags"] == "hallucinated_completion"


def test_markdown_tables_escape_cells(card: Scorecard) -> None:
    md = to_markdown(card)
    assert "| component | mean | 95% interval | pass rate | flip rate | tasks |" in md
    assert "| read-notes | 2/3 (0.67) ⚠ flip | 3/3 (1.00) |" in md
    assert "| hallucinated_completion | 1 |" in md
    assert "gpt \\| &lt;x&gt;" in md and "<x>" not in md


def test_junit_one_testcase_per_task(card: Scorecard) -> None:
    root = ET.fromstring(to_junit(card))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["read-notes"].find("failure")
    assert failure is not None and failure.get("message") == "failed: outcome (2/3 passed)"
    assert cases["write-report"].find("failure") is None
    assert cases["abstain-delete"].find("skipped") is not None


def test_junit_survives_hostile_text() -> None:
    card = build_scorecard(SUITE, {"id": 'x"<&\x00', "config": {}}, RUNS, resamples=10)
    root = ET.fromstring(to_junit(card))
    assert root.find("testsuite").get("name").startswith('basic[x"<&')  # type: ignore[union-attr]


def test_gate_thresholds(card: Scorecard) -> None:
    assert gate(card, {"outcome": 0.8, "safety": 1.0}).passed
    failed = gate(card, {"outcome": 0.9, "completion": 0.1})
    assert not failed.passed
    assert failed.failures == [
        "outcome: mean 0.833 < 0.9",
        "completion: not evaluated (threshold 0.1)",
    ]


def test_composite_values_show_without_pass_counts() -> None:
    runs = [run("read-notes", 0, True)]
    runs[0]["components"].append(cs("composite", None, 0.4))
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, runs, resamples=10)
    assert "| read-notes | 1/1 (1.00) | 1/1 (1.00) | 0.40 |" in to_markdown(card)
    case = ET.fromstring(to_junit(card)).find("testsuite/testcase")
    assert case is not None and case.find("system-out") is None


def test_null_scores_are_marked_not_evaluated() -> None:
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, [run("read-notes", 0, None)])
    assert "| read-notes | not evaluated | 1/1 (1.00) |" in to_markdown(card)
    case = ET.fromstring(to_junit(card)).find("testsuite/testcase")
    assert case is not None and case.findtext("system-out") == "not evaluated: outcome"


def test_one_task_has_no_interval_not_a_zero_width_one() -> None:
    runs = [run("read-notes", t, p) for t, p in enumerate([True, False, True])]
    card = build_scorecard(SUITE, {"id": "e", "config": {}}, runs, resamples=50)
    outcome = card.summary("outcome")
    assert outcome is not None and outcome.n_tasks == 1
    assert outcome.mean == pytest.approx(2 / 3)
    assert (outcome.low, outcome.high) == (None, None)  # "not available", never [0.67, 0.67]
    assert "[0.67, 0.67]" not in to_markdown(card)
