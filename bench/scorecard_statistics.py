"""What the named statistics cost: `build_scorecard` on synthetic runs (T tasks x K trials x 6
components, random pass/fail and values), timed N times, against the same statistics with one
`bootstrap_mean` per statistic instead of `bootstrap_means`' one draw per component.

    .venv/bin/python bench/scorecard_statistics.py [--tasks 10] [--trials 5] [--repeat 10]

Prints JSON: medians in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from tracecard.scorers import bootstrap_mean, build_scorecard, parse_suite

COMPONENTS = ("invocation", "completion", "outcome", "safety", "efficiency", "composite")


def _runs(tasks: int, trials: int) -> list[dict[str, Any]]:
    rng = random.Random(0)
    runs = []
    for t in range(tasks):
        for k in range(trials):
            scores = []
            for component in COMPONENTS:
                value = rng.random()
                passed = None if component == "composite" else value > 0.3
                scores.append(
                    {"component": component, "value": value, "passed": passed,
                     "scorer": component, "version": "1"}
                )  # fmt: skip
            runs.append(
                {"run_id": f"r{t}-{k}", "task_id": f"t{t}", "trial": k, "status": "finished",
                 "components": scores}
            )  # fmt: skip
    return runs


def _median_ms(work: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    text = 'schema_version = 1\nname = "s"\n' + "".join(
        f'[[tasks]]\nid = "t{i}"\ninstruction = "x"\n' for i in range(args.tasks)
    )
    suite = parse_suite(text, "toml")
    runs = _runs(args.tasks, args.trials)
    card = build_scorecard(suite, {"id": "e", "config": {}}, runs)
    columns = 0
    for summary in card.components:
        columns += 3 + 2 * max(0, len(summary.pass_at_k) - 1)
    one_each = [[0.5 + 0.01 * i for i in range(args.tasks)]] * columns

    def separate() -> None:
        for column in one_each:
            bootstrap_mean(column)

    result = {
        "tasks": args.tasks,
        "trials": args.trials,
        "statistics_with_intervals": columns,
        "build_scorecard_ms": _median_ms(
            lambda: build_scorecard(suite, {"id": "e", "config": {}}, runs), args.repeat
        ),
        "one_bootstrap_mean_per_statistic_ms": _median_ms(separate, args.repeat),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
