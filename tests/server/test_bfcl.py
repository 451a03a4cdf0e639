"""`tracecard import bfcl` and agreement with BFCL's own checkers on a fixed, seeded sample.

The sample: the first entry of every supported category (two for the multi-turn ones) and a few
chosen for the branches they reach, their ground truth and every perturbation and surface
variation that applies (seed 0), judged by BFCL's AST / multi-turn / irrelevance checkers and by
tracecard's scorers; every branch of BFCL's checkers is reached both ways. The full measurement
is bench/bfcl_agreement.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecard.scorers import Task, dump_suite, parse_suite, suite_version
from tracecard.server.bfcl.agreement import bfcl_verdict, simulated_spans, tracecard_verdict
from tracecard.server.bfcl.branches import BRANCHES, exercised
from tracecard.server.bfcl.disagreements import CLASSES, TRACECARD_WRONG, classify
from tracecard.server.bfcl.env import MULTI_TURN, SINGLE_TURN, UNSUPPORTED
from tracecard.server.bfcl.importer import ImportError_, import_suite
from tracecard.server.bfcl.mcp_server import STATE_TOOL
from tracecard.server.bfcl.trajectories import PERTURBATIONS, ground_truth, perturb
from tracecard.server.cli.main import main
from tracecard.server.runs.sandbox import substitute
from tracecard.server.settings import ConfigError

SUITE = import_suite(list(MULTI_TURN + SINGLE_TURN), limit=1, name="bfcl-sample")
SAMPLE = import_suite(list(MULTI_TURN), limit=2, name="bfcl-mt")


def test_one_entry_of_every_supported_category_imports_and_round_trips() -> None:
    categories = {t.metadata["bfcl_category"] for t in SUITE.tasks}
    assert categories == set(MULTI_TURN + SINGLE_TURN)
    for fmt in ("toml", "json"):
        again = parse_suite(dump_suite(SUITE, fmt), fmt, f"bfcl.{fmt}")  # type: ignore[arg-type]
        assert suite_version(again) == suite_version(SUITE)
    multi = SUITE.task("multi_turn_base_0")
    assert multi.params == {"entry": "multi_turn_base_0"} and len(multi.turns) == 4
    first = multi.turns[0]
    assert first.invocation is not None and [c.tool for c in first.invocation.calls] == [
        "cd",
        "mkdir",
        "mv",
    ]
    assert first.outcome is not None
    paths = {p.path for p in first.outcome.predicates}
    assert paths == {"$.structuredContent.GorillaFileSystem", "$.structuredContent.TwitterAPI"}
    assert [(p.upstream, p.tool) for p in first.outcome.probes] == [("bfcl", STATE_TOOL)]
    irrelevant = SUITE.task("irrelevance_0")
    assert irrelevant.invocation is not None and irrelevant.invocation.expect_no_calls
    simple = SUITE.task("simple_python_0").invocation
    assert simple is not None and simple.calls[0].strict_arguments
    unit = simple.calls[0].arguments["unit"]
    assert unit.optional and unit.one_of == ["units", ""]  # BFCL compares a given "" too
    miss = SAMPLE.task("multi_turn_miss_param_0").turns
    assert any(t.invocation and t.invocation.expect_no_calls for t in miss)


def test_the_cli_writes_a_suite_that_suite_check_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bfcl.toml"
    code = main(["import", "bfcl", "--category", "multi_turn_base", "--limit", "1", "-o", str(out)])
    assert code == 0
    assert "{task.entry}" in (tmp_path / "bfcl.upstreams.toml").read_text()
    assert main(["suite", "check", str(out)]) == 0
    assert "1 task" in capsys.readouterr().out


@pytest.mark.parametrize("category", sorted(UNSUPPORTED))
def test_unsupported_categories_say_why(category: str) -> None:
    with pytest.raises(ImportError_, match="not supported: .+"):
        import_suite([category])


def test_unknown_ids_are_named() -> None:
    with pytest.raises(ImportError_, match="no such entries in simple_python: simple_python_x"):
        import_suite(["simple_python"], ids=["simple_python_x"])


def test_task_params_reach_a_per_run_command_and_a_missing_one_says_which() -> None:
    assert substitute("--entry={task.entry}", None, {"entry": "e1"}) == "--entry=e1"
    with pytest.raises(ConfigError, match=r"no param 'entry' \(its params: none\)"):
        substitute("{task.entry}", None, {})


# Besides the first entries of each category: entries whose seeded variations reach the branches
# the first ones do not (lists of objects, BFCL's "variable" answers, parallel pairing...)
BRANCH_ENTRIES = [
    "live_simple_165-98-0",
    "multiple_119",
    "simple_python_14",
    "simple_python_89",
    "simple_python_307",
    "parallel_178",
]
COVER = import_suite(
    sorted({e.rsplit("_", 1)[0] for e in BRANCH_ENTRIES}), ids=BRANCH_ENTRIES, name="bfcl-cover"
)


def _judged(tasks: list[Task]) -> list[dict[str, object]]:
    """Each task's ground truth and every perturbation that applies (seed 0), judged both ways."""
    rows = []
    for task in tasks:
        truth = ground_truth(task.id)
        for kind in ("ground_truth", *PERTURBATIONS):
            trajectory = truth if kind == "ground_truth" else perturb(task.id, truth, kind, 0)
            if trajectory is None:
                continue
            ours, components = tracecard_verdict(task, simulated_spans(task, task.id, trajectory))
            theirs = bfcl_verdict(task.id, trajectory)
            rows.append(
                {
                    "entry": task.id,
                    "kind": kind,
                    "tracecard": ours,
                    "bfcl": theirs.valid,
                    "error": theirs.error,
                    "branches": exercised(
                        task.id, trajectory, theirs.valid, theirs.error, list(theirs.messages)
                    ),
                    "class": classify(task.id, trajectory, ours, components, theirs),
                }
            )
    return rows


def test_every_checker_branch_both_ways_and_no_disagreement_is_tracecards() -> None:
    rows = _judged([t for suite in (SUITE, SAMPLE, COVER) for t in suite.tasks])
    wrong = [r for r in rows if r["class"] == TRACECARD_WRONG]
    assert not wrong, json.dumps(wrong, indent=1, default=str)
    # every disagreement is one the docs name (docs/benchmarks/bfcl.md), with its evidence
    assert {r["class"] for r in rows} <= {"", *CLASSES}
    reached = {(branch, accepted) for r in rows for branch, accepted in r["branches"]}  # type: ignore[attr-defined]
    missing = [(b, way) for b in BRANCHES for way in (True, False) if (b, way) not in reached]
    assert not missing, f"branches not exercised both ways: {missing}"
    # a sample that can tell: ground truth passes, and perturbations do fail
    assert all(r["tracecard"] for r in rows if r["kind"] == "ground_truth")
    assert sum(not r["tracecard"] for r in rows) >= 200


# Possible answers nested more than one object deep: a `dict` parameter holding an object, an
# array of `dict` (objects matched position by position), and a 128-combination object.
NESTED = [
    "simple_python_96",
    "multiple_119",
    "live_simple_44-18-0",
    "live_simple_165-98-0",
    "live_simple_189-114-0",
    "live_multiple_63-25-0",
    "live_multiple_64-26-0",
    "live_multiple_121-46-0",
]


def test_nested_possible_answers_are_judged_as_bfcls_checker_judges_them() -> None:
    categories = sorted({entry.rsplit("_", 1)[0] for entry in NESTED})
    suite = import_suite(categories, ids=NESTED, name="bfcl-nested")
    verdicts = _judged(list(suite.tasks))
    assert [v for v in verdicts if v["tracecard"] != v["bfcl"]] == []
    assert all(v["tracecard"] for v in verdicts if v["kind"] == "ground_truth")  # BFCL's too
    changed = [v for v in verdicts if v["kind"] == "changed_argument"]
    assert len(changed) == len(NESTED) and not any(v["tracecard"] for v in changed)
    body = suite.task("live_simple_44-18-0").invocation
    assert body is not None and len(body.calls[0].arguments["body"].one_of or []) == 128
