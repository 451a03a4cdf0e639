"""What the trials estimate adds to `tracecard compare`: the comparison as the CLI computes it
(two scorecards, the paired comparison, the view, tool drift), then `with_trials_needed` on the
same view (forced to `undecided`, so the estimate always runs), each timed N times.

    .venv/bin/python bench/compare_statistics.py --db DB A B [--component outcome] [--repeat 20]

Prints JSON: medians in milliseconds and the number of paired tasks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tracecard.server.api.evaluation import comparison_view, with_drift
from tracecard.server.audit.trials import with_trials_needed
from tracecard.server.evaluation.service import compare, experiment_drift
from tracecard.traces.store import Store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--component", default="outcome")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    url = args.db if "://" in args.db else f"sqlite:///{args.db}"
    store = Store(url)
    try:
        compare_ms, estimate_ms = [], []
        view: dict[str, object] = {}
        for _ in range(args.repeat):
            started = time.perf_counter()
            view = comparison_view(compare(store, args.a, args.b, args.component))
            view = with_drift(view, experiment_drift(store, [args.a, args.b]), False)
            compare_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            estimated = with_trials_needed({**view, "verdict": "undecided"}, store, args.a, args.b)
            estimate_ms.append((time.perf_counter() - started) * 1000)
        print(
            json.dumps(
                {
                    "tasks": len(view.get("tasks", [])),  # type: ignore[arg-type]
                    "compare_ms_median": round(statistics.median(compare_ms), 2),
                    "trials_estimate_ms_median": round(statistics.median(estimate_ms), 3),
                    "trials_needed": estimated.get("trials_needed"),
                },
                indent=2,
            )
        )
    finally:
        store.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
