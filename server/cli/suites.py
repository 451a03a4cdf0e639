"""`tracecard suite check`, `score`, `compare`, `export` (and `gate`, in its own module): work on
the database directly, so they need no running server (scorers are pure; rescoring never touches
the tools)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecard.scorers import (
    SuiteError,
    load_suite,
    suite_version,
)
from tracecard.server.cli import gate as gate_cli
from tracecard.server.cli import report as report_cli
from tracecard.server.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    UsageError,
    existing_store,
    print_json,
    read_settings,
    settings_from_args,
    warn,
)
from tracecard.server.cli.gate import component_statistics, known_component, resolve_experiment

if TYPE_CHECKING:  # (what a command needs is imported when it runs, not to parse its flags)
    from tracecard.traces.store import Store

# Each format's writer in tracecard.scorers, loaded when used; `xml` is the old name of `junit`
WRITERS: dict[str, str] = {
    "json": "to_json",
    "csv": "to_csv",
    "md": "to_markdown",
    "junit": "to_junit",
    "xml": "to_junit",
}


def _store(args: argparse.Namespace) -> contextlib.AbstractContextManager[Store]:
    """The database of `--db`/`--config`, which must exist (never created here)."""
    return existing_store(read_settings(args))


def _tools_ok(args: argparse.Namespace, suite: Any, path: str) -> bool:
    """With `--config`: every tool the suite names is on its servers' tools/list."""
    if args.config is None:
        return True
    import asyncio

    from tracecard.server.evaluation.tool_lists import check_suite_tools

    settings = settings_from_args(args)  # `--config` alone: ./tracecard.toml or a parent's
    findings, _ = asyncio.run(check_suite_tools(settings, suite, path))
    for finding in findings:
        print(f"{finding.level}: {finding.message}", file=sys.stderr)
    return not any(f.level == "error" for f in findings)


def _suite_check(args: argparse.Namespace) -> int:
    if args.settings is not None:
        warn("--settings is deprecated: use --config PATH (the same flag as in every command)")
        if args.config is None:
            args.config = args.settings
    failed = unreadable = 0
    for path in args.files:
        try:
            suite = load_suite(path)
        except SuiteError as exc:
            print(str(exc), file=sys.stderr)
            failed += 1
            unreadable += not os.path.isfile(path)
            continue
        if not _tools_ok(args, suite, path):
            failed += 1
            continue
        print(
            f"{path}: ok — suite {suite.name!r}, {len(suite.tasks)} task(s), "
            f"version {suite_version(suite)[:12]}"
        )
    # a checker's answer, like a linter's: 1 = a suite is wrong; 2 = a file to check is missing
    return EXIT_USAGE if unreadable else 1 if failed else 0


def _score(args: argparse.Namespace) -> int:
    from tracecard.server.evaluation.scorecards import scorecard_for

    with _store(args) as store:
        code = _rescore(store, args)
        if args.json:
            print_json(
                {
                    "experiment_id": args.experiment,
                    "components": component_statistics(scorecard_for(store, args.experiment)),
                }
            )
        return code


def _rescore(store: Store, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from tracecard.server.evaluation.service import experiment_with_runs, rescore

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
    print(
        f"rescored {len(results)} of {len(runs)} run(s) of experiment {args.experiment}",
        file=sys.stderr if args.json else sys.stdout,
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tracecard.server.audit.trials import trials_line, with_trials_needed
    from tracecard.server.evaluation.service import compare, experiment_drift
    from tracecard.server.evaluation.views import comparison_view, config_names, with_drift
    from tracecard.server.orchestration.summary import comparison_table, verdict_line

    component = known_component(args.component, "--component")
    with _store(args) as store:
        a, b = resolve_experiment(store, args.a), resolve_experiment(store, args.b)
        view = comparison_view(compare(store, a, b, component))
        view = with_drift(view, experiment_drift(store, [a, b]), args.allow_drift)
        view = with_trials_needed(view, store, a, b)  # when undecided (#23)
        name_a, name_b = config_names(store, a, b)
        robust = _robustness(store, {"a": a, "b": b})  # replay, faults (docs/replay.md)
    view = {**view, "a_config": name_a, "b_config": name_b}
    if robust:
        view["robustness"] = {side: found.model_dump(mode="json") for side, found in robust.items()}
    verdict = view["verdict"]
    if verdict is None:  # drifted tool definitions: no verdict without --allow-drift
        if args.json:
            print_json({**view, "fail_on": args.fail_on, "exit_code": EXIT_FAILED})
        else:
            print(f"compare: {view['reason']}", file=sys.stderr)
        return EXIT_FAILED
    worse = verdict == "A better" or (args.fail_on == "any" and verdict != "B better")
    code = EXIT_FAILED if args.fail_on and worse else 0
    if args.json:
        print_json(
            {**view, "fail_on": args.fail_on, "allow_drift": args.allow_drift, "exit_code": code}
        )
        return code
    Console().print(comparison_table(view, name_a, name_b))
    print(verdict_line(view, name_a, name_b))
    print(f"A {name_a}: experiment {a} · B {name_b}: experiment {b}")
    if (more := trials_line(view)) is not None:
        print(more)
    for side, found in robust.items():
        name = name_a if side == "a" else name_b
        for line in found.lines():
            print(f"{side.upper()} {name}: {line}")
    if code:
        print(f"compare failed: verdict {verdict!r} with --fail-on {args.fail_on}")
    return code


def _robustness(store: Any, experiments: dict[str, str]) -> dict[str, Any]:
    """Each side's robustness section, for the sides that ran under replay or faults."""
    from tracecard.server.faults.robustness import experiment_robustness
    from tracecard.traces import queries

    found = {}
    for side, experiment_id in experiments.items():
        row = queries.get_experiment(store, experiment_id)
        if row is not None and row.environment:
            found[side] = experiment_robustness(store, row)
    return found


def _export(args: argparse.Namespace) -> int:
    from tracecard.server.evaluation.scorecards import scorecard_for

    if args.format == "cassette":  # the recordings, for replay elsewhere (docs/replay.md)
        from tracecard.server.cli import cassette

        return cassette.export_command(args)
    settings = read_settings(args)
    with existing_store(settings) as store:
        card = scorecard_for(store, resolve_experiment(store, args.experiment))
        if args.format in ("json", "md"):  # replay and faults (docs/replay.md)
            from tracecard.server.faults.robustness import with_robustness

            card = with_robustness(store, card)
    base_url = args.base_url or settings.base_url
    from tracecard import scorers

    output: str | bytes = getattr(scorers, WRITERS[args.format])(card, base_url)
    text = output.decode() if isinstance(output, bytes) else output
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        if args.json:
            print_json(
                {
                    "experiment_id": args.experiment,
                    "format": args.format,
                    "output": args.output,
                    "components": component_statistics(card),
                }
            )
        else:
            print(f"wrote {args.output}", file=sys.stderr)
    elif args.json and args.format != "json":
        raise UsageError("--json without --output needs --format json (stdout holds one document)")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _with_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", help="tracecard.toml, for its `db` (default: ./tracecard.toml or a parent's)"
    )
    parser.add_argument(
        "--db", help="database URL or SQLite file (default .tracecard/tracecard.db)"
    )


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON document on stdout"
    )


def register(sub: Any) -> None:
    """Add the suite and scorecard subcommands."""
    suite = sub.add_parser("suite", help="suite files: check")
    suite_sub = suite.add_subparsers(dest="suite_command", metavar="SUITE_COMMAND")
    check = suite_sub.add_parser("check", help="validate suite files (TOML or JSON)")
    check.add_argument("files", nargs="+", help="suite files")
    check.add_argument(
        "--config",
        nargs="?",
        const="",
        metavar="PATH",
        help="also check every tool name against the tools/list of the servers in this "
        "tracecard.toml (stdio servers are started; --config alone: ./tracecard.toml or a "
        "parent's)",
    )
    # the old spelling of --config: still accepted, with a deprecation warning
    check.add_argument("--settings", nargs="?", const="", help=argparse.SUPPRESS)
    check.set_defaults(handler=_suite_check)

    score = sub.add_parser("score", help="rescore an experiment's stored traces")
    score.add_argument("--experiment", required=True, help="experiment id")
    score.add_argument("--quiet", action="store_true", help="no progress bar")
    _json_flag(score)
    _with_db(score)
    score.set_defaults(handler=_score)

    comparison = sub.add_parser("compare", help="paired comparison of two experiments")
    comparison.add_argument("a", help="experiment A, the baseline: id or configuration name")
    comparison.add_argument("b", help="experiment B, the candidate: id or configuration name")
    comparison.add_argument("--component", default="outcome", help="component (default outcome)")
    comparison.add_argument(
        "--fail-on",
        choices=("regression", "any"),
        help="exit 1 when B is worse (regression), or not better (any: also undecided)",
    )
    comparison.add_argument(
        "--allow-drift",
        action="store_true",
        help="give a verdict even when the two experiments saw different tool definitions",
    )
    _json_flag(comparison)
    _with_db(comparison)
    comparison.set_defaults(handler=_compare)

    export = sub.add_parser("export", help="write an experiment's scorecard")
    export.add_argument(
        "--experiment", required=True, help="experiment id, or a configuration's name (its latest)"
    )
    export.add_argument(
        "--format",
        choices=sorted([*WRITERS, "cassette"]),
        default="md",
        help="output format: md (default), json, csv or junit (xml: the old name of junit); "
        "cassette: the recordings, for replay elsewhere (docs/replay.md)",
    )
    export.add_argument(
        "--base-url",
        help="the viewer's address for the runs' links (default: the configured server's, "
        "http://127.0.0.1:7800)",
    )
    export.add_argument("--output", "-o", help="file to write (default stdout)")
    _json_flag(export)
    _with_db(export)
    export.set_defaults(handler=_export)

    gate_cli.register(sub)
    report_cli.register(sub)
