"""`tracecard run --queue`: the experiment's cells go on the database's queues for
`tracecard worker` processes; this command follows their progress and prints the scorecard."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from tracecard.client import ExperimentHandle, TracecardClient
from tracecard.server.cli.common import EXIT_FAILED, EXIT_INFRA, UsageError, settings_from_args
from tracecard.server.jobs.cell import Cell

__all__ = ["EXIT_INFRA", "cells_of", "run_queued"]


def cells_of(
    experiment: ExperimentHandle, argv: list[str], timeout_s: float, grace_s: float
) -> list[Cell]:
    """One job argument per run of the experiment (its first attempt)."""
    return [
        Cell(
            experiment_id=experiment.id,
            config_name=str(experiment.config.get("name", "default")),
            task_id=run.task_id,
            trial=run.trial,
            run_id=run.id,
            agent=argv,
            timeout_s=timeout_s,
            grace_s=grace_s,
            context="worker",
        )
        for run in experiment.runs
    ]


def task_upstreams(suite_path: str) -> dict[str, list[str]]:
    """Each task's upstreams, for the queue its limits put it on."""
    from tracecard.scorers.suite import load_suite

    suite = load_suite(suite_path)
    return {task.id: list(task.upstreams) for task in suite.tasks}


def exit_code(cells: dict[str, Any], max_failed: int) -> int:
    """3 when cells were left to the infrastructure, 1 for more agent failures than allowed."""
    counts = cells["counts"]
    if counts["infra"] or counts["queued"] or counts["running"]:
        return EXIT_INFRA
    return EXIT_FAILED if counts["failed"] > max_failed else 0


def run_queued(
    args: argparse.Namespace,
    client: TracecardClient,
    experiment: ExperimentHandle,
    argv: list[str],
    console: Console,
) -> int:
    """Enqueue every cell, follow until all ended, print the scorecard; the exit code."""
    from tracecard.server.cli.common import print_json
    from tracecard.server.cli.run_output import print_summary, run_summary_json
    from tracecard.server.jobs.engine import system_database_url
    from tracecard.server.jobs.enqueue import enqueue_cells, follow
    from tracecard.server.jobs.limits import cell_queue
    from tracecard.traces.engine import normalise_url

    settings = settings_from_args(args, db=args.db)
    try:
        system_url = system_database_url(normalise_url(settings.db))
    except ValueError as exc:
        raise UsageError(f"--queue needs the workers' database (--db): {exc}") from exc
    upstreams = task_upstreams(args.suite)
    cells = cells_of(experiment, argv, args.timeout, args.grace)
    queued = [
        (c, cell_queue(settings, upstreams.get(c["task_id"], []), args.tags), 1) for c in cells
    ]
    enqueue_cells(system_url, queued)
    console.print(
        f"queued {len(cells)} cells on {', '.join(sorted({q for _, q, _ in queued}))}: "
        "`tracecard worker --db ...` processes run them; following progress (Ctrl-C stops "
        "following, the cells keep running)"
    )
    try:
        final = follow(client, experiment.id, console, interval_s=args.follow_interval)
    except KeyboardInterrupt:
        console.print(
            f"stopped following; the cells go on: tracecard experiment show {experiment.id}"
        )
        return 130
    card = print_summary(console, client, experiment.id, [])
    code = exit_code(final, args.max_failed_runs)
    if args.json:
        document = run_summary_json(card, [], client, code)
        document["cells"] = final["counts"]
        document["lost_attempts"] = final["lost_attempts"]
        print_json(document)
    if code == EXIT_INFRA:
        console.print(
            f"{final['counts']['infra']} cell(s) lost to the infrastructure, not the agent: "
            f"`tracecard experiment resume {experiment.id}` runs them again (exit {EXIT_INFRA})"
        )
    return code
