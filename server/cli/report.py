"""`tracecard report --format github`: the Markdown for `$GITHUB_STEP_SUMMARY` and a pull-request
comment body: the scorecard's statistics, the gate's checks (the same flags as `tracecard gate`),
regressions against a baseline and links to the failing runs (docs/ci.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tracecard.scorers import compare_experiments, gate
from tracecard.server.cli.common import read_settings
from tracecard.server.cli.gate import add_gate_checks, baseline_of, flag_limits, gate_inputs

__all__ = ["register"]


def _report(args: argparse.Namespace) -> int:
    from tracecard.scorers.report import github_report  # (not to parse the flags)
    from tracecard.server.cli.stored import stored_scorecards

    thresholds, no_regress, required = gate_inputs(args, need_one=False)
    settings = read_settings(args)
    with stored_scorecards(settings) as cards:
        card = cards.scorecard(cards.resolve(args.experiment))
        baseline = baseline_of(cards, args, card)
    checks_given = thresholds or args.max_flag or args.max_flags is not None or required
    result = None
    if checks_given or (baseline is not None and no_regress):
        result = gate(
            card,
            thresholds,
            max_flags=flag_limits(args, card),
            max_total_flags=args.max_flags,
            required=required,
            baseline=baseline,
            no_regress=no_regress,
            strict=args.strict,
        )
    comparison = None
    if baseline is not None:
        comparison = compare_experiments(baseline, card, no_regress[0] if no_regress else "outcome")
    name = str(baseline.experiment.config.get("name")) if baseline else None
    text = github_report(card, args.base_url or settings.base_url, result, comparison, name)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(sub: Any) -> None:
    """Add `tracecard report`."""
    parser = sub.add_parser(
        "report",
        help="write a CI report (GitHub Markdown: step summary and PR comment)",
        description="Write the experiment's report as GitHub-flavoured Markdown for "
        "$GITHUB_STEP_SUMMARY or a pull-request comment: statistics, gate checks, regressions "
        "against --baseline and links to the failing runs. It starts with a marker "
        "(<!-- tracecard-report suite=… config=… -->) that stays the same on reruns, so a bot "
        "can update its comment. Exits 0: the report is not the gate (run tracecard gate).",
    )
    parser.add_argument(
        "--experiment", required=True, help="experiment id, or a configuration's name (its latest)"
    )
    parser.add_argument(
        "--format", choices=["github"], default="github", help="output format: github (default)"
    )
    parser.add_argument("--output", "-o", help="file to write (default stdout)")
    parser.add_argument(
        "--base-url",
        help="the viewer's address for links (default: the configured server's, "
        "http://127.0.0.1:7800)",
    )
    add_gate_checks(parser)
    parser.set_defaults(handler=_report)
