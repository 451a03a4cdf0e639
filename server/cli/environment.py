"""`tracecard run`'s replay flags (docs/replay.md): `--replay-from EXP` and how to match."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tracecard.server.cli.common import UsageError
from tracecard.server.faults.plan import read_plan


def add_replay_arguments(run: Any) -> None:
    """Add `--replay-from`, `--replay`, `--replay-trial`, `--replay-match`, `--on-miss`."""
    group = run.add_argument_group("replay (docs/replay.md)")
    group.add_argument(
        "--replay-from",
        metavar="EXPERIMENT",
        help="answer the upstreams from this experiment's recorded runs (same suite version)",
    )
    group.add_argument(
        "--replay",
        choices=("tools", "model", "all"),
        default="tools",
        help=(
            "what is replayed: tools (live model), model (live tools), all (nothing live: "
            "a determinism check); default tools"
        ),
    )
    group.add_argument(
        "--replay-trial",
        type=int,
        metavar="N",
        help="replay source trial N for every trial (default: the same trial)",
    )
    group.add_argument(
        "--replay-match",
        choices=("exact", "sequence", "ignore-args"),
        default="exact",
        help="how a request finds its recorded answer (default exact)",
    )
    group.add_argument(
        "--on-miss",
        choices=("error", "live"),
        default="error",
        help="a request with no recorded answer: an error (default) or forwarded live",
    )
    run.add_argument(
        "--faults",
        metavar="PLAN.toml",
        help="seeded fault rules for the agent's calls (docs/replay.md, 'Fault plans')",
    )


def faults_body(args: argparse.Namespace) -> dict[str, Any] | None:
    """The `faults` of `POST /api/experiments` from `--faults plan.toml` (checked here)."""
    if not args.faults:
        return None
    try:
        text = Path(args.faults).read_text(encoding="utf-8")
        return read_plan(args.faults, text).stored()
    except OSError as exc:
        raise UsageError(f"--faults {args.faults}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--faults {exc}") from None


def replay_body(args: argparse.Namespace) -> dict[str, Any] | None:
    """The `replay` of `POST /api/experiments`, or None without `--replay-from`."""
    if not args.replay_from:
        return None
    body: dict[str, Any] = {
        "source": args.replay_from,
        "mode": args.replay,
        "match": args.replay_match,
        "on_miss": args.on_miss,
    }
    if args.replay_trial is not None:
        body["trial"] = args.replay_trial
    return body
