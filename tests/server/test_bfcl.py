"""`tracecard import bfcl` and agreement with BFCL's own checkers on a fixed, seeded sample.

The sample: the first entry of every supported category (two for the multi-turn ones), its
ground truth and every perturbation that applies, judged by BFCL's AST / multi-turn /
irrelevance checkers and by tracecard's scorers. The full measurement is bench/bfcl_agreement.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecard.scorers import dump_suite, parse_suite, suite_version
from tracecard.server.bfcl.agreement import bfcl_verdict, simulated_spans, tracecard_verdict
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
    assert unit.optional and unit.one_of == ["units"]
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


def _sample() -> list[tuple[str, str]]:
    rows = []
    for suite in (SUITE, SAMPLE):
        for task in suite.tasks:
            rows.append((task.id, "ground_truth"))
            rows += [(task.id, kind) for kind in PERTURBATIONS]
    return sorted(set(rows))


def test_verdicts_agree_with_bfcls_checkers_on_the_seeded_sample() -> None:
    tasks = {t.id: t for suite in (SUITE, SAMPLE) for t in suite.tasks}
    rows = []
    for entry_id, kind in _sample():
        truth = ground_truth(entry_id)
        trajectory = truth if kind == "ground_truth" else perturb(entry_id, truth, kind, seed=0)
        if trajectory is None:
            continue
        task = tasks[entry_id]
        ours, components = tracecard_verdict(task, simulated_spans(task, entry_id, trajectory))
        theirs = bfcl_verdict(entry_id, trajectory)
        rows.append((entry_id, kind, ours, theirs.valid, theirs.error, components))
    disagreements = [r for r in rows if r[2] != r[3]]
    assert not disagreements, json.dumps(disagreements, indent=1, default=str)
    # a sample that can tell: ground truth passes everywhere, and perturbations do fail
    assert len(rows) >= 80
    assert all(r[2] for r in rows if r[1] == "ground_truth")
    assert sum(not r[2] for r in rows) >= 40


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
    verdicts = []
    for task in suite.tasks:
        truth = ground_truth(task.id)
        for kind in ("ground_truth", *PERTURBATIONS):
            trajectory = truth if kind == "ground_truth" else perturb(task.id, truth, kind, 0)
            if trajectory is None:
                continue
            ours, _ = tracecard_verdict(task, simulated_spans(task, task.id, trajectory))
            theirs = bfcl_verdict(task.id, trajectory)
            verdicts.append((task.id, kind, ours, theirs.valid, theirs.error))
    assert [v for v in verdicts if v[2] != v[3]] == []
    assert all(v[2] for v in verdicts if v[1] == "ground_truth")  # BFCL accepts them too
    changed = [v for v in verdicts if v[1] == "changed_argument"]
    assert len(changed) == len(NESTED) and not any(v[2] for v in changed)
    body = suite.task("live_simple_44-18-0").invocation
    assert body is not None and len(body.calls[0].arguments["body"].one_of or []) == 128
