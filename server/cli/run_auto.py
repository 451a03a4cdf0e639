"""`tracecard run --trials auto --baseline EXP`: one trial per task per round until the paired
comparison with the baseline is decided, or `--max-trials` (docs/scorecards.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from tracecard.client import ExperimentHandle, TracecardClient
from tracecard.server.cli.common import UsageError

__all__ = ["check_auto", "rounds_until_decided", "trials_value"]


def check_auto(args: argparse.Namespace) -> bool:
    """`--trials auto` needs `--baseline`; it starts with one trial per task."""
    if args.trials != "auto":
        if args.baseline:
            raise UsageError("--baseline goes with --trials auto")
        return False
    if not args.baseline:
        raise UsageError(
            "--trials auto needs --baseline EXPERIMENT: the experiment to decide against"
        )
    if args.max_trials < 1:
        raise UsageError("--max-trials must be at least 1")
    args.trials = 1
    return True


def rounds_until_decided(
    args: argparse.Namespace,
    client: TracecardClient,
    experiment: ExperimentHandle,
    run_round: Callable[[ExperimentHandle], bool],
    console: Console,
) -> bool:
    """Rounds of one trial per task until the comparison with --baseline is decided; False
    when interrupted."""
    from tracecard.server.audit.rounds import run_until_decided

    stopped = False

    def guarded(runs: ExperimentHandle) -> bool:
        nonlocal stopped
        stopped = not run_round(runs)
        return not stopped

    look, rounds = run_until_decided(
        client,
        experiment,
        guarded,
        baseline=args.baseline,
        component=args.component,
        max_trials=args.max_trials,
        report=console.print,
    )
    console.print(
        f"trials until decided: {look.verdict} on {args.component} after {rounds} trial(s) "
        f"per task against {args.baseline}"
        + ("" if look.verdict != "undecided" else f" (--max-trials {args.max_trials} reached)")
    )
    return not stopped


def trials_value(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, not {text!r}") from None
