"""`tracecard import bfcl --category NAME… [--ids …] [--limit N] -o suite.toml`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tracecard.server.cli.common import warn
from tracecard.server.settings import ConfigError


def _import_bfcl(args: argparse.Namespace) -> int:
    from tracecard.scorers import dump_suite
    from tracecard.server.bfcl.env import BfclMissing
    from tracecard.server.bfcl.importer import ImportError_, import_suite, upstream_config

    if args.name is not None:
        warn(
            "--name is deprecated here: use --suite-name NAME (--name is the configuration's "
            "name in tracecard run)"
        )
        args.suite_name = args.suite_name or args.name
    try:
        suite = import_suite(args.category, ids=args.ids, limit=args.limit, name=args.suite_name)
    except (BfclMissing, ImportError_) as exc:
        raise ConfigError(str(exc)) from exc
    output = Path(args.output)
    text = dump_suite(suite, "json" if output.suffix.lower() == ".json" else "toml")
    output.write_text(text, encoding="utf-8")
    upstreams = output.with_name(output.stem + ".upstreams.toml")
    upstreams.write_text(upstream_config(args.python, args.category), encoding="utf-8")
    turns = sum(len(t.turns) for t in suite.tasks)
    print(f"wrote {output}: suite {suite.name!r}, {len(suite.tasks)} tasks, {turns} turns")
    print(f"wrote {upstreams}: add it to tracecard.toml (or pass it with --config)")
    return 0


def register(sub: Any) -> None:
    """Add `tracecard import bfcl` to the command line."""
    importer = sub.add_parser("import", help="write a suite from another benchmark's data")
    kinds = importer.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    bfcl = kinds.add_parser(
        "bfcl",
        help="BFCL v4 entries (needs: pip install 'tracecard[bfcl]')",
        description="Write a suite from BFCL v4 entries, plus SUITE.upstreams.toml with the "
        "per-run BFCL environment server it needs. Unsupported categories say why.",
    )
    bfcl.add_argument("--category", nargs="+", required=True, help="BFCL categories")
    bfcl.add_argument("--ids", nargs="+", default=None, help="only these entry ids")
    bfcl.add_argument("--limit", type=int, default=None, help="at most N entries per category")
    bfcl.add_argument(
        "--suite-name", default=None, help="the suite's name (default: bfcl-CATEGORY)"
    )
    # the old spelling of --suite-name: still accepted, with a deprecation warning
    bfcl.add_argument("--name", default=None, help=argparse.SUPPRESS)
    bfcl.add_argument("-o", "--output", required=True, help="suite file (.toml or .json)")
    bfcl.add_argument(
        "--python", default=sys.executable, help="interpreter the BFCL server runs with"
    )
    bfcl.set_defaults(handler=_import_bfcl)
