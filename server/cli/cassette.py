"""`tracecard export --format cassette` and `tracecard import cassette` (docs/replay.md)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracecard.server.cli.common import (
    UsageError,
    existing_store,
    print_json,
    settings_from_args,
)
from tracecard.server.cli.gate import resolve_experiment
from tracecard.server.replay.cassette import export_cassette, import_cassette
from tracecard.traces.engine import is_sqlite, normalise_url
from tracecard.traces.store import Store


def export_command(args: argparse.Namespace) -> int:
    """Write the experiment's cassette to `--output` (a file: it is not text for stdout)."""
    if not args.output:
        raise UsageError("--format cassette needs --output FILE, e.g. -o run.tccas")
    settings = settings_from_args(args, db=getattr(args, "db", None))
    with existing_store(settings) as store, Path(args.output).open("wb") as output:
        counts = export_cassette(store, resolve_experiment(store, args.experiment), output)
    summary = {"experiment_id": counts.experiment_id, "format": "cassette", "output": args.output}
    if args.json:
        print_json({**summary, "runs": counts.runs, "spans": counts.spans})
    else:
        print(
            f"wrote {args.output}: {counts.runs} runs, {counts.spans} spans, "
            f"{counts.scores} scores",
            file=sys.stderr,
        )
    return 0


@contextlib.contextmanager
def _target(args: argparse.Namespace) -> Iterator[Store]:
    """The database to import into, created (and migrated) when it does not exist yet."""
    url = normalise_url(settings_from_args(args, db=args.db).db)
    if is_sqlite(url) and url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    store = Store(url)
    try:
        store.create_schema()
        yield store
    finally:
        store.dispose()


def _import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"{args.file}: no such cassette file")
    with _target(args) as store:
        counts = import_cassette(store, path)
    if args.json:
        print_json(
            {"experiment_id": counts.experiment_id, "runs": counts.runs, "spans": counts.spans}
        )
    else:
        print(
            f"imported experiment {counts.experiment_id}: {counts.runs} runs, {counts.spans} "
            f"spans, {counts.scores} scores; replay it with --replay-from {counts.experiment_id}"
        )
    return 0


def register(sub: Any) -> None:
    """Add `cassette` to `tracecard import` (the command `tracecard import bfcl` lives in)."""
    importer = sub.choices["import"]
    kinds = next(a for a in importer._actions if isinstance(a, argparse._SubParsersAction))
    cassette = kinds.add_parser(
        "cassette",
        help="load an experiment's cassette (tracecard export --format cassette)",
        description="Load a cassette file into this database, so that experiments here can "
        "replay it (--replay-from EXPERIMENT): no tool servers, no API keys.",
    )
    cassette.add_argument("file", help="the .tccas file")
    cassette.add_argument(
        "--config", help="tracecard.toml, for its `db` (default: ./tracecard.toml or a parent's)"
    )
    cassette.add_argument(
        "--db", help="database URL or SQLite file (default .tracecard/tracecard.db; created)"
    )
    cassette.add_argument("--json", action="store_true", help="print the result as JSON")
    cassette.set_defaults(handler=_import)
