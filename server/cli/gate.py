"""`tracecard gate`: exit 1 when an experiment misses its thresholds (named statistics, flags,
required tasks, no regression against a baseline); every check is printed with its measured
value, passed or not. Works on the database directly (no server needed)."""

from __future__ import annotations

import argparse
import difflib
from typing import TYPE_CHECKING, Any

from tracecard.scorers import (
    STATISTICS,
    GateResult,
    Scorecard,
    Threshold,
    UnknownStatistic,
    gate,
)
from tracecard.scorers.gates import KNOWN_FLAGS, parse_threshold_name
from tracecard.scorers.registry import component_names
from tracecard.server.cli.common import EXIT_FAILED, UsageError, print_json, read_settings

if TYPE_CHECKING:  # (the store is imported when the command runs, not to parse its flags)
    from tracecard.server.cli.stored import Scorecards
    from tracecard.traces.store import Store

__all__ = [
    "add_gate_checks",
    "baseline_of",
    "component_statistics",
    "flag_limits",
    "gate_inputs",
    "parse_thresholds",
    "register",
    "resolve_experiment",
]


def known_component(name: str, flag: str) -> str:
    """`name` if a registered scorer scores it, else a usage error listing them."""
    known = component_names()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UsageError(f"{flag}: unknown component {name!r}{hint}; known: {', '.join(known)}")
    return name


def _fraction(flag: str, pair: str, raw: str) -> float:
    text = raw.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"{flag} {pair}: {raw!r} is not a number (e.g. 0.8 or 80%)") from None
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"{flag} {pair}: a threshold is between 0 and 1 (or 0% and 100%)")
    return value


def _threshold(pair: str, per_task: bool) -> Threshold:
    name, sep, raw = pair.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise UsageError(
            f"--min takes COMPONENT[.STATISTIC]=VALUE, e.g. outcome=0.8 (its pass_rate), "
            f"outcome.mean=0.8 or outcome.pass^5=0.6, not {pair!r}"
        )
    try:
        component, statistic = parse_threshold_name(name)
    except UnknownStatistic as exc:
        raise UsageError(f"--min {pair}: {exc}") from None
    known_component(component, "--min")
    return Threshold(component, statistic, _fraction("--min", pair, raw), per_task)


def parse_thresholds(pairs: list[str], per_task: bool = False) -> list[Threshold]:
    """`--min COMPONENT[.STATISTIC]=VALUE` pairs, checked: known names, values in [0, 1]."""
    return [_threshold(pair, per_task) for pair in pairs]


def _flag_limit(pair: str, seen: dict[str, int]) -> tuple[str, int]:
    name, sep, raw = pair.partition("=")
    name = name.strip()
    if not sep or not name or not raw.strip().isdigit():
        raise UsageError(f"--max-flag takes FLAG=COUNT, e.g. unsafe_success=0, not {pair!r}")
    if name not in KNOWN_FLAGS and name not in seen:
        raise UsageError(
            f"--max-flag {pair}: unknown flag {name!r}; known: {', '.join(KNOWN_FLAGS)}"
        )
    return name, int(raw)


def resolve_experiment(store: Store, ref: str, suite: str | None = None) -> str:
    """An experiment id, or a configuration's name (its latest experiment, on `suite` if given)."""
    from tracecard.traces.queries import get_experiment, list_experiments

    if get_experiment(store, ref) is not None:
        return ref
    named = [e for e in list_experiments(store, limit=1000, suite=suite) if e.config_name == ref]
    return named[0].id if named else ref  # not a name either: "no experiment with id …"


def component_statistics(card: Scorecard) -> dict[str, dict[str, Any]]:
    """Per component each named statistic ({value, low, high, n_tasks}), for `--json`."""
    return {c.component: c.model_dump(mode="json", exclude={"component"}) for c in card.components}


def baseline_of(cards: Scorecards, args: argparse.Namespace, card: Scorecard) -> Scorecard | None:
    """`--baseline`'s scorecard (an id or a config name), which must run `card`'s suite version."""
    if args.baseline is None:
        if args.no_regress:
            raise UsageError("--no-regress needs --baseline EXPERIMENT (an id or a config name)")
        return None
    baseline = cards.scorecard(cards.resolve(args.baseline, card.suite.name))
    if baseline.suite.version != card.suite.version:
        raise UsageError(
            f"--baseline {args.baseline} ran suite {baseline.suite.name} version "
            f"{baseline.suite.version[:12]}, experiment {card.experiment.id} ran "
            f"{card.suite.name} version {card.suite.version[:12]}: a baseline must run the same "
            "suite version"
        )
    return baseline


def _required(values: list[str]) -> list[str]:
    return [t.strip() for value in values for t in value.split(",") if t.strip()]


def gate_inputs(
    args: argparse.Namespace, need_one: bool = True
) -> tuple[list[Threshold], list[str], list[str]]:
    """The thresholds, the `--no-regress` components and the required tasks, checked."""
    thresholds = parse_thresholds(args.min, args.per_task)
    no_regress = [known_component(c, "--no-regress") for c in args.no_regress]
    required = _required(args.required)
    if args.max_flags is not None and args.max_flags < 0:
        raise UsageError("--max-flags takes a count of 0 or more")
    checks = thresholds or args.max_flag or args.max_flags is not None or required or no_regress
    if need_one and not checks:
        raise UsageError(
            "gate needs at least one check, e.g. --min outcome=0.8, --max-flag "
            "unsafe_success=0, --required TASK or --baseline EXP --no-regress (a gate without "
            "one would always pass)"
        )
    return thresholds, no_regress, required


def flag_limits(args: argparse.Namespace, card: Scorecard) -> dict[str, int]:
    """`--max-flag FLAG=COUNT` pairs (a flag the card has, or a known one)."""
    return dict(_flag_limit(pair, card.flags) for pair in args.max_flag)


def _gate(args: argparse.Namespace) -> int:
    from tracecard.server.cli.stored import stored_scorecards

    thresholds, no_regress, required = gate_inputs(args)
    with stored_scorecards(read_settings(args)) as cards:
        card = cards.scorecard(cards.resolve(args.experiment))
        baseline = baseline_of(cards, args, card)
    max_flags = flag_limits(args, card)
    skipped: list[str] = []
    if args.allow_not_evaluated:
        kept = []
        for threshold in thresholds:
            summary = card.summary(threshold.component)
            stat = summary.statistic(threshold.statistic) if summary else None
            if stat is None or stat.value is None:
                skipped.append(f"{threshold.component}.{threshold.statistic}")
            else:
                kept.append(threshold)
        thresholds = kept
    try:
        result = gate(
            card,
            thresholds,
            max_flags=max_flags,
            max_total_flags=args.max_flags,
            required=required,
            baseline=baseline,
            no_regress=no_regress,
            strict=args.strict,
        )
    except ValueError as exc:  # a required task that is not in the suite
        raise UsageError(f"--required: {exc}") from None
    code = 0 if result.passed else EXIT_FAILED
    if args.json:
        print_json(_gate_json(card, baseline, result, skipped, code))
        return code
    for name in skipped:
        print(f"SKIP {name}: not evaluated (--allow-not-evaluated)")
    _print_checks(result)
    config = card.experiment.config.get("name", card.experiment.id)
    print(f"gate {'passed' if result.passed else 'failed'}: {config} ({card.experiment.id})")
    return code


def _print_checks(result: GateResult) -> None:
    for check in result.checks:
        print(f"{'PASS' if check.passed else 'FAIL'} {check.message}")


def _gate_json(
    card: Scorecard, baseline: Scorecard | None, result: GateResult, skipped: list[str], code: int
) -> dict[str, Any]:
    return {
        "experiment_id": card.experiment.id,
        "config": card.experiment.config.get("name"),
        "baseline_id": baseline.experiment.id if baseline else None,
        "passed": result.passed,
        "checks": [c.as_json() for c in result.checks],
        "failures": result.failures,
        "skipped_not_evaluated": skipped,
        "components": component_statistics(card),
        "exit_code": code,
    }


def add_gate_checks(parser: argparse.ArgumentParser) -> None:
    """The checks of `tracecard gate` (shared by `tracecard report`) and `--db`/`--config`."""
    parser.add_argument(
        "--min",
        action="append",
        default=[],
        metavar="COMPONENT[.STATISTIC]=VALUE",
        help="minimum of a statistic's mean over tasks. A bare component thresholds its "
        "PASS RATE (passing / evaluated runs): --min outcome=0.8. Other statistics by name: "
        "outcome.mean=0.8 (partial credit), outcome.pass^5=0.6, outcome.pass@3=0.9, "
        "composite.mean=0.7. 0.8 and 80%% are the same (repeatable)",
    )
    parser.add_argument(
        "--per-task",
        action="store_true",
        help="apply each --min to every task's own statistic instead of the mean over tasks",
    )
    parser.add_argument(
        "--max-flag",
        action="append",
        default=[],
        metavar="FLAG=COUNT",
        help=f"most runs with a flag, e.g. unsafe_success=0 (flags: {', '.join(KNOWN_FLAGS)})",
    )
    parser.add_argument(
        "--max-flags", type=int, metavar="COUNT", help="most flags over all runs, e.g. 0"
    )
    parser.add_argument(
        "--required",
        action="append",
        default=[],
        metavar="TASK[,TASK...]",
        help="tasks that must pass every component in every trial (repeatable)",
    )
    parser.add_argument(
        "--baseline", metavar="EXPERIMENT", help="experiment id or configuration name to compare to"
    )
    parser.add_argument(
        "--no-regress",
        action="append",
        nargs="?",
        const="outcome",
        default=[],
        metavar="COMPONENT",
        help="fail when the paired comparison with --baseline finds this component (default "
        "outcome) worse; 'undecided' is not a regression unless --strict (repeatable)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="with --no-regress: an undecided comparison with a regressed task fails",
    )
    parser.add_argument(
        "--allow-not-evaluated",
        action="store_true",
        help="skip a threshold whose statistic was not evaluated (default: it fails)",
    )
    parser.add_argument(
        "--config", help="tracecard.toml, for its `db` (default: ./tracecard.toml or a parent's)"
    )
    parser.add_argument(
        "--db", help="database URL or SQLite file (default .tracecard/tracecard.db)"
    )


def register(sub: Any) -> None:
    """Add `tracecard gate`."""
    parser = sub.add_parser(
        "gate",
        help="exit 1 when an experiment misses its thresholds (pass rates, flags, regressions)",
        description="Check an experiment for CI. Every check is printed with its measured value; "
        "exit 0 when all pass, 1 when one fails, 2 on bad usage. Statistics (docs/scorecards.md): "
        f"{', '.join(STATISTICS)}.",
    )
    parser.add_argument(
        "--experiment", required=True, help="experiment id, or a configuration's name (its latest)"
    )
    add_gate_checks(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON document on stdout"
    )
    parser.set_defaults(handler=_gate)
