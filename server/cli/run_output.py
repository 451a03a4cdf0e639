"""What `tracecard run` prints when its runs are done: the scorecard table and statuses, the
`--json` document, and a warning about an agent's own OpenTelemetry endpoint (also used by
`demo`, `audit` and `run --queue`)."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

from tracecard.client import TracecardClient
from tracecard.scorers.robustness import Robustness
from tracecard.server.cli.common import EXIT_FAILED, EXIT_INFRA, warn
from tracecard.server.orchestration.orchestrator import RunOutcome
from tracecard.server.orchestration.summary import failures_table, scorecard_table, status_line

__all__ = [
    "exit_code_of",
    "failed_runs",
    "infra_runs",
    "print_summary",
    "run_summary_json",
    "warn_about_otel_endpoint",
]


def print_summary(
    console: Console, client: TracecardClient, experiment_id: str, outcomes: list[RunOutcome]
) -> dict[str, Any]:
    """The scorecard table, the statuses and flags, the runs that failed to run, the URLs."""
    card: dict[str, Any] = client.scorecard(experiment_id)
    console.print(scorecard_table(card))
    console.print(status_line(card))
    if card.get("robustness"):  # replay, faults, with faults vs without (docs/replay.md)
        for line in Robustness.model_validate(card["robustness"]).lines():
            console.print(line, markup=False, highlight=False)
    failures = failures_table(outcomes)
    if failures is not None:
        console.print(failures)
    return card


def warn_about_otel_endpoint(server_url: str) -> None:
    """An agent keeps an OTEL_EXPORTER_OTLP_ENDPOINT it already has: say where its spans go."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        value = os.environ.get(name)
        if value and not value.rstrip("/").startswith(server_url.rstrip("/")):
            warn(
                f"{name}={value} is set: an OpenTelemetry-instrumented agent sends its own spans "
                f"there, not to tracecard; unset it, or export to {server_url}/v1/traces "
                "(TRACECARD_OTLP_ENDPOINT) too"
            )


def failed_runs(outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """Runs that errored, timed out or could not start (or could not be finished), the
    infrastructure's failures left out (`infra_runs`)."""
    return [
        o
        for o in outcomes
        if (o.status in ("errored", "timed_out") or o.finish_error) and o.end_reason is None
    ]


def infra_runs(outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """Runs the infrastructure failed (a sandbox or per-run upstream that never started)."""
    return [o for o in outcomes if o.end_reason is not None]


def exit_code_of(outcomes: list[RunOutcome], max_failed: int, console: Console) -> int:
    """3 when the infrastructure failed runs (not the agent: rerun them), 1 for more agent
    failures than `max_failed`, else 0; says why."""
    infra, failed = infra_runs(outcomes), failed_runs(outcomes)
    if infra:
        reasons = ", ".join(sorted({str(o.end_reason) for o in infra}))
        console.print(
            f"{len(infra)} run(s) failed by the infrastructure, not the agent ({reasons}): "
            f"`tracecard experiment rerun ID --cells infra` runs them again (exit {EXIT_INFRA})"
        )
        return EXIT_INFRA
    if len(failed) > max_failed:
        console.print(
            f"{len(failed)} run(s) errored, timed out or could not start "
            f"(--max-failed-runs {max_failed}): exit {EXIT_FAILED}"
        )
        return EXIT_FAILED
    return 0


def run_summary_json(
    card: dict[str, Any], outcomes: list[RunOutcome], client: TracecardClient, code: int
) -> dict[str, Any]:
    """What `tracecard run --json` prints: the experiment id, the statuses, the numbers."""
    experiment_id = card["experiment"]["id"]
    statuses: dict[str, int] = {}
    for run in card["runs"]:
        statuses[run["status"]] = statuses.get(run["status"], 0) + 1
    return {
        "experiment_id": experiment_id,
        "config": card["experiment"]["config"].get("name"),
        "suite": card["suite"]["name"],
        "runs": len(card["runs"]),
        "statuses": statuses,
        "failed_runs": [
            {"run_id": o.run.id, "task_id": o.run.task_id, "status": o.status}
            for o in failed_runs(outcomes)
        ],
        "infra_runs": [
            {"run_id": o.run.id, "task_id": o.run.task_id, "end_reason": o.end_reason}
            for o in infra_runs(outcomes)
        ],
        "components": {
            c["component"]: {k: c.get(k) for k in ("pass_rate", "mean", "flip", "n_tasks")}
            for c in card["components"]
        },
        "flags": card.get("flags", {}),
        "scorecard_url": f"{client.base_url}/api/experiments/{experiment_id}/scorecard.json",
        "viewer_url": client.viewer_url(experiment_id),
        "exit_code": code,
    }
