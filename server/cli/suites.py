"""`tracecard suite check`, `score`, `compare`, `export`, `gate`: work on the database directly,
so they need no running server (scorers are pure; rescoring never touches the tools)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from tracecard.scorers import (
    SuiteError,
    gate,
    load_suite,
    suite_version,
    to_csv,
    to_json,
    to_junit,
    to_markdown,
)
from tracecard.server.api.evaluation import comparison_view
from tracecard.server.cli.common import existing_store, settings_from_args
from tracecard.server.evaluation.service import (
    compare,
    experiment_with_runs,
    rescore,
    scorecard_for,
)
from tracecard.server.orchestration.summary import comparison_table, verdict_line
from tracecard.server.runs.service import RunError
from tracecard.traces.store import Store

WRITERS: dict[str, object] = {"json": to_json, "csv": to_csv, "md": to_markdown, "xml": to_junit}


def _store(args: argparse.Namespace) -> contextlib.AbstractContextManager[Store]:
    """The database of `--db`/`--config`, which must exist (never created here)."""
    return existing_store(settings_from_args(args, db=getattr(args, "db", None)))


def _suite_check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            suite = load_suite(path)
        except SuiteError as exc:
            print(str(exc), file=sys.stderr)
            failed += 1
            continue
        print(
            f"{path}: ok — suite {suite.name!r}, {len(suite.tasks)} task(s), "
            f"version {suite_version(suite)[:12]}"
        )
    return 1 if failed else 0


def _score(args: argparse.Namespace) -> int:
    with _store(args) as store:
        return _rescore(store, args)


def _rescore(store: Store, args: argparse.Namespace) -> int:
    _experiment, runs = experiment_with_runs(store, args.experiment)
    console = Console(stderr=True)
    with Progress(
        TextColumn("rescoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=args.quiet,
    ) as progress:
        bar = progress.add_task("runs", total=len(runs))
        results = rescore(store, runs, progress=lambda done: progress.update(bar, completed=done))
    print(f"rescored {len(results)} of {len(runs)} run(s) of experiment {args.experiment}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    with _store(args) as store:
        view = comparison_view(compare(store, args.a, args.b, args.component))
    Console().print(comparison_table(view, args.a, args.b))
    print(verdict_line(view, args.a, args.b))
    return 0


def _export(args: argparse.Namespace) -> int:
    with _store(args) as store:
        card = scorecard_for(store, args.experiment)
    output: str | bytes = WRITERS[args.format](card)  # type: ignore[operator]
    text = output.decode() if isinstance(output, bytes) else output
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _parse_thresholds(pairs: list[str]) -> dict[str, float]:
    thresholds: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise RunError(f"--min takes COMPONENT=VALUE, e.g. outcome=0.8, not {pair!r}")
        thresholds[name] = float(value)
    return thresholds


def _gate(args: argparse.Namespace) -> int:
    with _store(args) as store:
        card = scorecard_for(store, args.experiment)
    result = gate(card, _parse_thresholds(args.min))
    for line in result.failures:
        print(f"FAIL {line}")
    print("gate passed" if result.passed else "gate failed")
    return 0 if result.passed else 1


def _with_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", help="tracecard.toml, for its `db` (default: ./tracecard.toml or a parent's)"
    )
    parser.add_argument(
        "--db", help="database URL or SQLite file (default .tracecard/tracecard.db)"
    )


def register(sub: Any) -> None:
    """Add the suite and scorecard subcommands."""
    suite = sub.add_parser("suite", help="suite files: check")
    suite_sub = suite.add_subparsers(dest="suite_command", metavar="SUITE_COMMAND")
    check = suite_sub.add_parser("check", help="validate suite files (TOML or JSON)")
    check.add_argument("files", nargs="+", help="suite files")
    check.set_defaults(handler=_suite_check)

    score = sub.add_parser("score", help="rescore an experiment's stored traces")
    score.add_argument("--experiment", required=True, help="experiment id")
    score.add_argument("--quiet", action="store_true", help="no progress bar")
    _with_db(score)
    score.set_defaults(handler=_score)

    comparison = sub.add_parser("compare", help="paired comparison of two experiments")
    comparison.add_argument("a", help="experiment id A (the baseline)")
    comparison.add_argument("b", help="experiment id B (the candidate)")
    comparison.add_argument("--component", default="outcome", help="component (default outcome)")
    _with_db(comparison)
    comparison.set_defaults(handler=_compare)

    export = sub.add_parser("export", help="write an experiment's scorecard")
    export.add_argument("--experiment", required=True, help="experiment id")
    export.add_argument("--format", choices=sorted(WRITERS), default="md", help="default md")
    export.add_argument("--output", "-o", help="file to write (default stdout)")
    _with_db(export)
    export.set_defaults(handler=_export)

    gate_parser = sub.add_parser(
        "gate", help="exit non-zero when a component's mean is below its threshold"
    )
    gate_parser.add_argument("--experiment", required=True, help="experiment id")
    gate_parser.add_argument(
        "--min",
        action="append",
        default=[],
        metavar="COMPONENT=VALUE",
        help="threshold on a component's mean, e.g. --min outcome=0.8 (repeatable)",
    )
    _with_db(gate_parser)
    gate_parser.set_defaults(handler=_gate)
