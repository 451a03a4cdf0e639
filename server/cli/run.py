"""`tracecard run`: evaluate an agent command on a suite, k trials per task, and print the
scorecard. Talks to a tracecard server over HTTP: `--server URL`, or an embedded one started
here (the same app as `tracecard serve`, on the same database) for the length of the command."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from tracecard.client import ExperimentHandle, TracecardError
from tracecard.server.cli.common import UsageError, print_json, warn
from tracecard.server.cli.environment import add_replay_arguments, faults_body, replay_body
from tracecard.server.cli.run_auto import check_auto, rounds_until_decided, trials_value
from tracecard.server.cli.run_output import (
    exit_code_of,
    print_summary,
    run_summary_json,
    warn_about_otel_endpoint,
)
from tracecard.server.cli.run_process import (
    connect,
    interrupt_on_sigterm,
    orchestrate,
    serve_forever,
)
from tracecard.server.orchestration.agents import CommandAgent
from tracecard.server.orchestration.orchestrator import RunOutcome
from tracecard.server.runs.service import RunError

INTERRUPTED = 130


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {"name": args.name, "agent": args.agent}
    for pair in args.meta:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RunError(f"--meta takes KEY=VALUE, e.g. --meta model=gpt-x, not {pair!r}")
        config[key] = value
    return config


def _looks_like_config(value: str) -> bool:
    return value.endswith(".toml") or Path(value).is_file()


def resolve_renamed_flags(args: argparse.Namespace) -> None:
    """`--name` is the configuration's name, `--config` the tracecard.toml (as in every
    command); the old spellings (`--settings FILE`, `--config NAME`) still work, with a warning."""
    if args.settings:
        warn("--settings is deprecated: use --config PATH (the same flag as in every command)")
        if args.config and not args.name and not _looks_like_config(args.config):
            args.name = args.config
            warn(f"--config {args.config} as the name is deprecated: use --name {args.config}")
        args.config = args.settings
    elif args.config and not args.name and not _looks_like_config(args.config):
        warn(
            f"--config {args.config} as the name is deprecated: use --name {args.config} "
            "(--config is the path of tracecard.toml, as in every command)"
        )
        args.name, args.config = args.config, None
    if not args.name:
        raise UsageError(
            "--name is required: the name of the configuration under test, e.g. --name careful"
        )


def agent_command(text: str) -> list[str]:
    """The agent command as argv, checked to exist before the first trial."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--agent: cannot split {text!r}: {exc}") from exc
    if not argv:
        raise UsageError("--agent is empty: give the command that runs one trial of your agent")
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else program
    if found is None or not (Path(found).is_file() and os.access(found, os.X_OK)):
        raise UsageError(
            f"--agent: command {program!r} not found"
            + (" on PATH" if os.sep not in program else " (or not executable)")
            + f": check the spelling of {text!r}"
        )
    return argv


def _agent_argv(args: argparse.Namespace) -> list[str]:
    """The agent command, or a built-in baseline's (`--agent builtin:oracle`, docs/audit.md)."""
    from tracecard.server.audit.builtin import BuiltinAgentError, builtin_argv, is_builtin

    if not is_builtin(args.agent):
        return agent_command(args.agent)
    try:
        return builtin_argv(args.agent, args.suite, _work_root(args) / "builtin")
    except BuiltinAgentError as exc:
        raise UsageError(str(exc)) from exc


def _work_root(args: argparse.Namespace) -> Path:
    return Path(args.work_dir or Path(".tracecard") / "agent-runs")


def _run(args: argparse.Namespace) -> int:
    resolve_renamed_flags(args)
    argv = _agent_argv(args)
    auto = check_auto(args)  # --trials auto: rounds until decided (docs/scorecards.md)
    if args.trials < 1 or args.concurrency < 1 or args.timeout <= 0:
        raise UsageError("--trials and --concurrency must be at least 1, --timeout positive")
    if args.max_failed_runs < 0:
        raise UsageError("--max-failed-runs must be 0 or more")
    # With --json, stdout is the JSON document alone: the human summary goes to stderr.
    console = Console(soft_wrap=True, stderr=args.json)  # URLs stay whole; tables still fit
    started = time.monotonic()
    interrupt_on_sigterm()
    with connect(args) as client:
        warn_about_otel_endpoint(client.base_url)
        if not Path(args.suite).is_file():
            raise UsageError(f"--suite {args.suite}: no such file")
        try:
            suite = client.add_suite_file(args.suite)
        except TracecardError as exc:  # 422: `PATH:LINE: field: reason`, as `suite check` says
            raise RunError(
                exc.detail if exc.status_code == 422 else f"{args.suite}: {exc}"
            ) from exc
        except OSError as exc:
            raise RunError(f"{args.suite}: {exc}") from exc
        try:
            experiment = client.create_experiment(
                suite["version"], _config(args), args.trials, replay_body(args), faults_body(args)
            )
        except TracecardError as exc:  # 422: the server's reason says what to change
            raise RunError(
                f"{args.suite}: {exc.detail if exc.status_code == 422 else exc}"
            ) from exc
        tasks = len(suite["tasks"])
        console.print(
            f"experiment [bold]{experiment.id}[/]: {args.name} on suite {suite['name']} "
            f"({tasks} tasks × {args.trials} trials = {len(experiment.runs)} runs), "
            f"{args.concurrency} at a time, timeout {args.timeout:g}s — server {client.base_url}"
        )
        if args.queue:  # workers run the cells (docs/workers.md); this follows their progress
            from tracecard.server.jobs.queued import run_queued

            return run_queued(args, client, experiment, argv, console)
        work_dir = _work_root(args) / experiment.id
        agent = CommandAgent(argv, grace_s=args.grace)
        outcomes: list[RunOutcome] = []

        def run_round(runs: ExperimentHandle) -> bool:
            done, stopped = orchestrate(
                client,
                runs,
                agent,
                console=console,
                concurrency=args.concurrency,
                timeout_s=args.timeout,
                work_dir=work_dir,
                progress=not args.quiet and not args.json,
                jobs_db=getattr(args, "jobs_db", None),
            )
            outcomes.extend(done)
            return not stopped

        if auto:
            interrupted = not rounds_until_decided(args, client, experiment, run_round, console)
        else:
            interrupted = not run_round(experiment)
        card = print_summary(console, client, experiment.id, outcomes)
        console.print(f"agent output and answers: {work_dir}/<run id>/")
        console.print(f"scorecard: {client.base_url}/api/experiments/{experiment.id}/scorecard.md")
        console.print(f"viewer: {client.viewer_url(experiment.id)}")
        if getattr(args, "database", None):
            console.print(
                f"database: {args.database} (later commands: tracecard export --experiment "
                f"{experiment.id} --db {args.database})"
            )
        if interrupted:
            aborted = sum(1 for o in outcomes if o.status == "aborted")
            console.print(f"interrupted: kept the finished runs, aborted {aborted}")
            code = INTERRUPTED
        else:
            code = exit_code_of(outcomes, args.max_failed_runs, console)
        if args.json:
            print_json(run_summary_json(card, outcomes, client, code))
        if interrupted:
            return code
        console.print(f"done in {time.monotonic() - started:.1f}s")
        if not args.server:
            console.print(
                "the embedded server has stopped; browse the results with "
                f"`tracecard serve{' --config ' + args.config if args.config else ''}"
                f"{' --db ' + args.db if args.db else ''}`"
                if not args.serve
                else "serving the viewer until Ctrl-C"
            )
            if args.serve:
                sys.stdout.flush()
                serve_forever()
    return code


def register(sub: Any) -> None:
    """Add `tracecard run`."""
    run = sub.add_parser(
        "run",
        help="evaluate an agent command on a suite (k trials per task) and print the scorecard",
        description="Create an experiment, run the agent command once per run with the "
        "environment described in docs/agents.md, score every run, print the scorecard.",
    )
    run.add_argument("--suite", required=True, help="suite file (TOML or JSON)")
    run.add_argument("--name", help="name of the configuration under test, e.g. careful")
    run.add_argument(
        "--trials",
        type=trials_value,
        default=1,
        help="trials per task (default 1); auto: add rounds of one trial per task until the "
        "comparison with --baseline is decided (docs/scorecards.md)",
    )
    run.add_argument(
        "--baseline", help="with --trials auto: the experiment id to compare to until decided"
    )
    run.add_argument(
        "--max-trials",
        type=int,
        default=10,
        help="with --trials auto: at most this many trials per task (default 10)",
    )
    run.add_argument(
        "--component",
        default="outcome",
        help="with --trials auto: the component the comparison decides on (default outcome)",
    )
    run.add_argument(
        "--agent",
        required=True,
        help="command that runs one trial, e.g. 'python agent.py'; or a built-in baseline: "
        "builtin:null, builtin:oracle, builtin:random-tool[:SEED] (docs/audit.md)",
    )
    run.add_argument("--concurrency", type=int, default=4, help="runs at a time (default 4)")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds per run (default 300)")
    run.add_argument(
        "--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)"
    )
    run.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config metadata, e.g. --meta model=gpt-x (repeatable)",
    )
    run.add_argument("--server", help="URL of a running tracecard (default: an embedded one)")
    run.add_argument("--token", help="API token of --server")
    run.add_argument(
        "--config",
        help="tracecard.toml for the embedded server (default: ./tracecard.toml or a parent's)",
    )
    run.add_argument("--settings", help=argparse.SUPPRESS)  # deprecated spelling of --config
    run.add_argument(
        "--db", help="database of the embedded server (default .tracecard/tracecard.db)"
    )
    run.add_argument("--port", type=int, help="port of the embedded server (default 7800; 0: any)")
    run.add_argument(
        "--work-dir", help="where answers and output tails go (default .tracecard/agent-runs)"
    )
    run.add_argument("--serve", action="store_true", help="keep the embedded server up afterwards")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument(
        "--max-failed-runs",
        type=int,
        default=0,
        metavar="N",
        help="exit 0 with up to N runs errored, timed out or not started (default 0)",
    )
    run.add_argument(
        "--json", action="store_true", help="print the experiment id, statuses and means as JSON"
    )
    run.add_argument(
        "--queue",
        action="store_true",
        help="enqueue the cells for `tracecard worker` processes on --db and follow progress",
    )
    run.add_argument("--tags", help="with --queue: only workers with this tag take the cells")
    run.add_argument(
        "--follow-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="with --queue: seconds between progress lines (default 1)",
    )
    add_replay_arguments(run)
    run.set_defaults(handler=_run)
