"""`tracecard experiment show|resume|rerun|cancel ID`: an experiment's cells as durable jobs."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from tracecard.server.cli.common import existing_store, print_json, read_settings

__all__ = ["register"]


def _doomed(attempts: list[dict[str, Any]]) -> str:
    """A running attempt's recorded infrastructure failure: its run will end unscored."""
    infra = next((a["infra"] for a in attempts if a["state"] == "running" and a["infra"]), None)
    return f"{infra['reason']} (running, will not be scored)" if infra else ""


def _system_url(db: str) -> str:
    from tracecard.server.cli.common import UsageError
    from tracecard.server.jobs.engine import system_database_url
    from tracecard.traces.engine import normalise_url

    try:
        return system_database_url(normalise_url(db))
    except ValueError as exc:
        raise UsageError(f"--db: {exc}") from exc


def _show(args: argparse.Namespace, console: Console) -> int:
    from tracecard.server.jobs.cells import experiment_cells
    from tracecard.server.jobs.enqueue import progress_line

    settings = read_settings(args)
    with existing_store(settings) as store:
        cells = experiment_cells(store, args.experiment)
    if args.json:
        print_json(cells)
        return 0
    console.print(
        f"experiment {args.experiment}: " + progress_line(cells, 0.0).rsplit(" · ETA", 1)[0]
    )
    table = Table("task", "trial", "state", "attempts", "run", "why")
    for cell in cells["cells"]:
        if cell["state"] == "done" and len(cell["attempts"]) <= 1:
            continue
        tried = ", ".join(f"#{a['attempt']} {a['state']}" for a in cell["attempts"]) or "-"
        table.add_row(
            cell["task_id"],
            str(cell["trial"]),
            cell["state"],
            tried,
            cell["run_id"],
            cell["end_reason"] or _doomed(cell["attempts"]),
        )
    if table.row_count:
        console.print(table)
    for worker in cells["workers"]:
        state = "stopped" if worker["stopped"] else f"{worker['running']} running"
        if worker["recovered_by"]:  # silent, and its cells were taken over
            state = f"lost, its cells recovered by {worker['recovered_by']}"
        console.print(
            f"worker {worker['id']} on {worker['host']}: {state}, "
            f"heartbeat {worker['heartbeat_age_s']:.0f}s ago"
        )
    return 0


def _act(args: argparse.Namespace, console: Console) -> int:
    from tracecard.server.jobs import control

    settings = read_settings(args)
    system_url = _system_url(settings.db)
    with existing_store(settings) as store:
        if args.action == "resume":
            plan = control.resume(
                store,
                settings,
                system_url,
                args.experiment,
                agent=args.agent,
                timeout_s=args.timeout,
                lost_after_s=args.lost_after,
            )
        elif args.action == "rerun":
            plan = control.rerun(
                store,
                settings,
                system_url,
                args.experiment,
                args.cells,
                agent=args.agent,
                timeout_s=args.timeout,
            )
        else:
            plan = control.cancel(store, system_url, args.experiment)
    if args.json:
        print_json(plan.as_dict())
        return 0
    parts = [f"{len(v)} {k}" for k, v in plan.as_dict().items() if v]
    console.print(
        f"experiment {args.experiment}: {', '.join(parts) or 'nothing to do'}"
        + ("" if args.action == "cancel" else "; `tracecard worker --db ...` runs them")
    )
    return 0


def _experiment(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True, stderr=args.json)
    if args.action == "show":
        return _show(args, console)
    return _act(args, console)


def register(sub: Any) -> None:
    """Add `tracecard experiment`."""
    parser = sub.add_parser(
        "experiment",
        help="an experiment's cells as jobs: show, resume, rerun, cancel",
        description="Show an experiment's cells by state, attempts and workers; resume its "
        "unfinished cells after a crash; rerun chosen cells as new attempts; cancel its queued "
        "and running cells (docs/workers.md).",
    )
    parser.add_argument("action", choices=("show", "resume", "rerun", "cancel"))
    parser.add_argument("experiment", help="the experiment id")
    parser.add_argument("--db", help="the database (default: the config's, or .tracecard/)")
    parser.add_argument("--config", help="tracecard.toml ([limits] decide the cells' queues)")
    parser.add_argument(
        "--cells",
        default="errored",
        help="rerun: errored (the agent failed), infra, all, or task=ID[,ID...] (default errored)",
    )
    parser.add_argument("--agent", help="resume/rerun: the agent command (default: as recorded)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run (300)")
    parser.add_argument(
        "--lost-after",
        type=float,
        default=30.0,
        help="resume: a worker silent this long is gone; its cells are resumed (default 30)",
    )
    parser.add_argument("--json", action="store_true", help="print what was done as JSON")
    parser.set_defaults(handler=_experiment)
