"""`tracecard audit SUITE`: run the baseline agents on a suite and flag the tasks that cannot
measure anything (docs/audit.md)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from tracecard.client import ExperimentHandle, TracecardClient, TracecardError
from tracecard.scorers.audit import audit_tasks
from tracecard.scorers.suite import SuiteError, load_suite
from tracecard.server.cli.common import EXIT_FAILED, UsageError, print_json
from tracecard.server.runs.service import RunError

__all__ = ["register"]


def _agents(text: str) -> list[str]:
    from tracecard.server.audit.runner import BASELINES

    agents = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in agents if a not in BASELINES]
    if unknown or not agents:
        raise UsageError(
            f"--agents {text}: known baselines are {', '.join(BASELINES)} (comma-separated)"
        )
    return list(dict.fromkeys(agents))


def _audit(args: argparse.Namespace) -> int:
    from tracecard.server.audit.report import audit_document, audit_markdown, audit_table
    from tracecard.server.audit.runner import collect_runs, run_baselines
    from tracecard.server.cli.run_process import connect, interrupt_on_sigterm, orchestrate

    if args.history:
        return _history(args)
    agents = _agents(args.agents)
    if args.trials < 1 or args.concurrency < 1 or args.timeout <= 0:
        raise UsageError("--trials and --concurrency must be at least 1, --timeout positive")
    try:
        suite = load_suite(args.suite)
    except SuiteError as exc:
        raise RunError(str(exc)) from exc
    console = Console(soft_wrap=True, stderr=args.json or args.markdown == "-")
    started = time.monotonic()
    interrupt_on_sigterm()
    work_root = Path(args.work_dir or Path(".tracecard") / "agent-runs")

    def run_one(
        client: TracecardClient, experiment: ExperimentHandle, agent: Any, label: str
    ) -> object:
        console.print(
            f"{label}: experiment {experiment.id}, {len(experiment.runs)} runs "
            f"({len(suite.tasks)} tasks × {args.trials} trials)"
        )
        _outcomes, interrupted = orchestrate(
            client,
            experiment,
            agent,
            console=console,
            concurrency=args.concurrency,
            timeout_s=args.timeout,
            work_dir=work_root / experiment.id,
            progress=not args.quiet and not args.json,
            label=label,
        )
        if interrupted:
            raise KeyboardInterrupt
        return _outcomes

    with connect(args) as client:
        try:
            stored = client.add_suite_file(args.suite)
        except TracecardError as exc:
            raise RunError(exc.detail if exc.status_code == 422 else str(exc)) from exc
        experiments = run_baselines(
            client,
            suite,
            stored["version"],
            agents,
            args.trials,
            run_one,
            seed=args.seed,
        )
        runs = collect_runs(client, suite, experiments)
        completion = {t.id: t.completion is not None for t in suite.tasks}
        audits = audit_tasks([t.id for t in suite.tasks], runs, completion)
        document = audit_document(
            suite=suite.name,
            version=stored["version"],
            base_url=client.base_url,
            trials=args.trials,
            experiments={e.agent: e.experiment_id for e in experiments},
            audits=audits,
        )
    document["elapsed_s"] = round(time.monotonic() - started, 1)
    if args.json:
        print_json(document)
    else:
        console.print(audit_table(document))
        for kind, why in document["checks"].items():
            if why:
                console.print(f"not checked: {kind} ({why})")
        console.print(f"done in {document['elapsed_s']:.1f}s")
    if args.markdown:
        text = audit_markdown(document)
        if args.markdown == "-":
            sys.stdout.write(text)
        else:
            Path(args.markdown).write_text(text, encoding="utf-8")
    if args.fail_on == "defects" and document["flagged_tasks"]:
        console.print(f"{document['flagged_tasks']} task(s) flagged (--fail-on defects): exit 1")
        return EXIT_FAILED
    return 0


def _history(args: argparse.Namespace) -> int:
    """`--history`: task health across the stored experiments of the suite's version."""
    from tracecard.scorers.suite import suite_version
    from tracecard.server.audit.history import history_document, history_table
    from tracecard.server.cli.common import existing_store, settings_from_args

    try:
        suite = load_suite(args.suite)
    except SuiteError as exc:
        raise RunError(str(exc)) from exc
    settings = settings_from_args(args, db=args.db)
    with existing_store(settings) as store:
        document = history_document(store, suite.name, suite_version(suite), args.component)
    if args.json:
        print_json(document)
        return 0
    console = Console(soft_wrap=True)
    if not document["experiments"]:
        console.print(f"no experiments of suite {suite.name} (this version) in the database")
        return 0
    console.print(history_table(document))
    return 0


def register(sub: Any) -> None:
    """Add `tracecard audit`."""
    audit = sub.add_parser(
        "audit",
        help="run the baseline agents on a suite and flag tasks that cannot measure anything",
        description="Run the built-in null, oracle and random-tool agents on SUITE (k trials "
        "each, through the proxy) and report, per task, the defects they reveal: passable by "
        "doing nothing, not passable by the oracle, gold arguments never shown, blind probes, "
        "weak invocation, unstable.",
    )
    audit.add_argument("suite", help="suite file (TOML or JSON)")
    audit.add_argument(
        "--agents",
        default="null,oracle,random-tool",
        help="baselines to run, comma-separated (default null,oracle,random-tool)",
    )
    audit.add_argument(
        "--trials", type=int, default=2, help="trials per task and baseline (default 2)"
    )
    audit.add_argument("--seed", type=int, default=0, help="random-tool's seed (default 0)")
    audit.add_argument("--concurrency", type=int, default=4, help="runs at a time (default 4)")
    audit.add_argument("--timeout", type=float, default=120.0, help="seconds per run (default 120)")
    audit.add_argument("--server", help="URL of a running tracecard (default: an embedded one)")
    audit.add_argument("--token", help="API token of --server")
    audit.add_argument(
        "--config",
        help="tracecard.toml for the embedded server (default: ./tracecard.toml or a parent's)",
    )
    audit.add_argument("--db", help="database of the embedded server")
    audit.add_argument(
        "--port", type=int, help="port of the embedded server (default 7800; 0: any)"
    )
    audit.add_argument(
        "--work-dir", help="where answers and output tails go (default .tracecard/agent-runs)"
    )
    audit.add_argument("--quiet", action="store_true", help="no progress bars")
    audit.add_argument("--json", action="store_true", help="print the audit as JSON on stdout")
    audit.add_argument(
        "--markdown", metavar="FILE", help="also write the audit as Markdown (- for stdout)"
    )
    audit.add_argument(
        "--fail-on",
        choices=("defects", "never"),
        default="never",
        help="exit 1 when any task is flagged (defects), for CI (default never)",
    )
    audit.add_argument(
        "--history",
        action="store_true",
        help="run nothing: task health across the experiments stored for this suite version",
    )
    audit.add_argument(
        "--component",
        default="outcome",
        help="with --history: the component judged (default outcome)",
    )
    audit.set_defaults(handler=_audit)
