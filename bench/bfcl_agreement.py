"""Agreement of tracecard's verdicts with BFCL's own checkers, on ground-truth replays and
perturbations of every supported category.

    .venv/bin/python bench/bfcl_agreement.py [--per-category 8] [--seeds 1] [--json out.json]
        [--category NAME...] [--from-json a.json b.json]

For each selected entry: its ground truth and each perturbation and surface variation that
applies (`trajectories.PERTURBATIONS`: dropped call, changed argument, reordered, duplicated, a
call a turn late or early, a call in a turn that needs none, a wrong function, an extra
read-only call, and the argument variations of `variations.py`: case, punctuation, whitespace,
numerals, booleans as strings, reordered keys, optional arguments...), judged by BFCL (its AST
checker, its multi-turn checker with the state and response checks, and its multi-turn
irrelevance checker) and by tracecard (the scorers on the trace the proxy records;
`tracecard.server.bfcl.agreement`). Prints the tables for docs/benchmarks/bfcl.md (by category,
by kind, by branch of BFCL's checkers and direction, disagreements by class) and every
disagreement. Bounded: about a minute for the default.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracecard.server.bfcl.agreement import (  # noqa: E402
    bfcl_verdict,
    simulated_spans,
    tracecard_verdict,
)
from tracecard.server.bfcl.branches import BRANCHES, exercised  # noqa: E402
from tracecard.server.bfcl.disagreements import CLASSES, classify  # noqa: E402
from tracecard.server.bfcl.env import MULTI_TURN, SINGLE_TURN  # noqa: E402
from tracecard.server.bfcl.importer import import_suite  # noqa: E402
from tracecard.server.bfcl.trajectories import PERTURBATIONS, ground_truth, perturb  # noqa: E402


def measure(per_category: int, seeds: int, categories: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    suite = import_suite(categories, limit=per_category, name="bfcl-agree")
    rows: list[dict[str, Any]] = []
    for task in suite.tasks:
        truth = ground_truth(task.id)
        cases: list[tuple[str, int, Any]] = [("ground_truth", 0, truth)]
        cases += [
            (k, s, perturb(task.id, truth, k, s)) for k in PERTURBATIONS for s in range(seeds)
        ]
        for kind, seed, trajectory in cases:
            if trajectory is None:
                continue
            ours, components = tracecard_verdict(task, simulated_spans(task, task.id, trajectory))
            theirs = bfcl_verdict(task.id, trajectory)
            branches = exercised(
                task.id, trajectory, theirs.valid, theirs.error, list(theirs.messages)
            )
            rows.append(
                {
                    "entry": task.id,
                    "category": task.metadata["bfcl_category"],
                    "kind": kind,
                    "seed": seed,
                    "tracecard": ours,
                    "bfcl": theirs.valid,
                    "bfcl_runner": theirs.runner_valid,
                    "bfcl_error": theirs.error,
                    "components": components,
                    "branches": branches,
                    "class": classify(task.id, trajectory, ours, components, theirs),
                }
            )
    return {"rows": rows, "seconds": round(time.perf_counter() - started, 1)}


def table(rows: list[dict[str, Any]], key: str) -> list[str]:
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    lines = [
        f"| {key} | trajectories | BFCL pass | tracecard pass | same verdict | vs BFCL runner |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(groups) + ["all"]:
        group = rows if name == "all" else groups[name]
        same = sum(r["tracecard"] == r["bfcl"] for r in group)
        runner = sum(r["tracecard"] == r["bfcl_runner"] for r in group)
        lines.append(
            f"| {name} | {len(group)} | {sum(r['bfcl'] for r in group)} | "
            f"{sum(r['tracecard'] for r in group)} | {same} ({100 * same / len(group):.1f}%) | "
            f"{runner} ({100 * runner / len(group):.1f}%) |"
        )
    return lines


def branch_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per branch of BFCL's checkers: trajectories that exercised it, accepted and rejected by
    BFCL, how many of those tracecard judged the same, and the variations most often behind
    each direction (ground truth aside)."""
    lines = [
        "| branch | BFCL accepts | same | BFCL rejects | same | accepted after | rejected after |",
        "|---|---|---|---|---|---|---|",
    ]
    for branch in BRANCHES:
        counts = {True: [0, 0], False: [0, 0]}
        kinds: dict[bool, collections.Counter[str]] = {
            True: collections.Counter(),
            False: collections.Counter(),
        }
        for row in rows:
            for name, accepted in row["branches"]:
                if name == branch:
                    counts[accepted][0] += 1
                    counts[accepted][1] += row["tracecard"] == row["bfcl"]
                    if row["kind"] != "ground_truth":
                        kinds[accepted][row["kind"]] += 1
        top = {way: ", ".join(k for k, _ in kinds[way].most_common(3)) for way in (True, False)}
        lines.append(
            f"| `{branch}` | {counts[True][0]} | {counts[True][1]} | {counts[False][0]} | "
            f"{counts[False][1]} | {top[True]} | {top[False]} |"
        )
    return lines


def class_table(rows: list[dict[str, Any]]) -> list[str]:
    found = collections.Counter(row["class"] for row in rows if row["class"])
    lines = ["| disagreement | trajectories |", "|---|---|"]
    lines += [f"| {name} | {found[name]} |" for name in CLASSES]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-category", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--json", default=None, help="also write every row here")
    parser.add_argument("--category", nargs="+", default=list(MULTI_TURN + SINGLE_TURN))
    parser.add_argument(
        "--from-json", nargs="+", default=None, help="print the tables of earlier --json files"
    )
    args = parser.parse_args()
    if args.from_json:  # e.g. several processes' measurements, one category set each
        parts = [json.loads(Path(name).read_text()) for name in args.from_json]
        result = {
            "rows": [row for part in parts for row in part["rows"]],
            "seconds": round(sum(part["seconds"] for part in parts), 1),
        }
    else:
        result = measure(args.per_category, args.seeds, args.category)
    rows = result["rows"]
    print("\n".join(table(rows, "category")))
    print()
    print("\n".join(table(rows, "kind")))
    print()
    print("\n".join(branch_table(rows)))
    print()
    print("\n".join(class_table(rows)))
    print(f"\n{len(rows)} trajectories in {result['seconds']} s")
    for row in rows:
        if row["tracecard"] != row["bfcl"]:
            print("differs:", json.dumps({k: v for k, v in row.items() if k != "branches"}))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
