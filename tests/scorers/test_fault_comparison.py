"""With faults vs without in the scorecard's robustness section: `compare`'s paired comparison
with the unfaulted experiment as A (same interval, verdict and reason), its line in `compare`'s
words, and the section in the JSON (schema 3, version 2 still read) and the Markdown."""

from __future__ import annotations

import json

import pytest

from tests.scorers.test_compare import card
from tracecard.scorers import compare_experiments, read_scorecard_json, to_json, to_markdown
from tracecard.scorers.fault_comparison import fault_comparison
from tracecard.scorers.robustness import Robustness
from tracecard.scorers.scorecard import Scorecard


def _section(without: Scorecard, with_faults: Scorecard) -> Robustness:
    paired = fault_comparison(without, with_faults, "its replay source")
    return Robustness(
        faults={"seed": 7, "rules": [{"kind": "tool_error"}]},
        replay=None,
        kinds=[],
        tasks=[],
        without_faults=paired,
    )


def test_the_numbers_are_compares() -> None:
    without = card(8, [1.0] * 8, "calm", trials=2)
    faulted = card(8, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], "stormy", trials=2)
    paired = fault_comparison(without, faulted, "its replay source")
    plain = compare_experiments(without, faulted)
    assert (paired.a, paired.b, paired.verdict, paired.reason) == (
        "calm",
        "stormy",
        plain.verdict,
        plain.reason,
    )
    assert paired.verdict == "A better"  # the faults cost the agent
    assert plain.interval is not None and paired.interval is not None
    assert (paired.interval.mean, paired.interval.low, paired.interval.high) == (
        plain.interval.mean,
        plain.interval.low,
        plain.interval.high,
    )
    assert [(t.task_id, t.a, t.b, t.cls) for t in paired.tasks] == [
        (t.task_id, t.a, t.b, t.cls) for t in plain.tasks
    ]
    assert paired.counts == plain.counts() and paired.counts["regressed"] == 5
    assert paired.pass_rate == {"a": 1.0, "b": pytest.approx(3 / 8)}
    assert paired.k == 2 and paired.pass_hat_k == {"a": 1.0, "b": pytest.approx(3 / 8)}
    line = paired.line()
    assert line.startswith("with faults vs without (calm, its replay source): outcome pass_rate ")
    assert "1.00 → 0.38; verdict: without faults is better (the faults cost the agent)" in line
    assert line.endswith("over 8 tasks) — the interval of mean(B - A) lies below 0")


def test_too_few_tasks_is_undecided_as_in_compare() -> None:
    paired = fault_comparison(card(3, [1, 1, 1], "a", 1), card(3, [0, 0, 0], "b", 1), "x")
    assert paired.verdict == "undecided"
    assert paired.reason == "3 paired task(s); at least 5 are needed to decide"
    assert "verdict: undecided: the data cannot separate them" in paired.line()


def test_the_section_in_json_and_markdown() -> None:
    without, faulted = card(5, [1] * 5, "calm", 1), card(5, [1, 0, 1, 0, 1], "stormy", 1)
    scored = faulted.model_copy(update={"robustness": _section(without, faulted)})
    document = json.loads(to_json(scored))
    assert document["schema_version"] == 3
    paired = document["robustness"]["without_faults"]
    assert paired["a"] == "calm" and paired["verdict"] == "undecided"
    assert [t["class"] for t in paired["tasks"]][:2] == ["regressed", "regressed"]
    assert read_scorecard_json(to_json(scored)) == scored
    markdown = to_markdown(scored)
    assert "- with faults vs without (calm, its replay source): outcome pass_rate 1.00 → 0.60" in (
        markdown
    )


def test_a_version_2_document_with_the_section_is_still_read() -> None:
    """Last session's tracecard wrote the section under schema 2 (without the comparison)."""
    faulted = card(5, [1, 0, 1, 0, 1], "stormy", 1)
    section = Robustness(faults={"seed": 7}, replay=None, kinds=[], tasks=[])
    old = json.loads(to_json(faulted.model_copy(update={"robustness": section})))
    old["schema_version"] = 2
    old["robustness"].pop("without_faults")
    read = read_scorecard_json(json.dumps(old))
    assert read.schema_version == 3 and read.robustness == section


def test_markdown_lists_the_paired_tasks() -> None:
    without, faulted = card(5, [1] * 5, "calm", 1), card(5, [1, 0, 1, 0, 1], "stormy", 1)
    markdown = to_markdown(faulted.model_copy(update={"robustness": _section(without, faulted)}))
    assert "| task | outcome without faults | with faults | with − without | class |" in markdown
    assert "| t1 | 1.00 | 0.00 | -1.00 | regressed |" in markdown
    assert "| t0 | 1.00 | 1.00 | +0.00 | both_pass |" in markdown
