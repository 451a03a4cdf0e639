"""The `tracecard` command line. Each subcommand lives in its own module and registers here.

Conventions (docs/scorecards.md lists the exit codes): `--config PATH` is always the
tracecard.toml (found in the current folder or a parent when not given); `--log-level` and
`--debug` work on every command; an error is one or two lines (a traceback only with `--debug`);
exit 0 ok, 1 the answer is "no" (gate failed, runs errored), 2 bad usage or input, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tracecard import __version__
from tracecard.server.cli.common import EXIT_USAGE, add_common_flags, configure_logging
from tracecard.server.errors import ConfigError, RunError

if TYPE_CHECKING:
    from tracecard.server.settings import Settings, UpstreamSettings

__all__ = ["COMMANDS", "build_parser", "command_of", "main", "parser_for"]

CLI = "tracecard.server.cli."
# Every command, in `--help` order: the modules whose `register` adds it (this one's for
# `serve`) and its one-line help, exactly as those modules give it (tests/server/test_cli_start.py
# checks both). Parsing needs only this table: `tracecard --help` and `--version` import no
# command, `tracecard CMD ...` imports CMD's modules and what CMD needs when it runs. A command
# missing here still works: it is parsed with every command registered, as before.
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "serve": ((), "run the proxy, the JSON API and the viewer"),
    "suite": ((CLI + "suites",), "suite files: check"),
    "score": ((CLI + "suites",), "rescore an experiment's stored traces"),
    "compare": ((CLI + "suites",), "paired comparison of two experiments"),
    "export": ((CLI + "suites",), "write an experiment's scorecard"),
    "gate": (
        (CLI + "suites",),
        "exit 1 when an experiment misses its thresholds (pass rates, flags, regressions)",
    ),
    "report": (
        (CLI + "suites",),
        "write a CI report (GitHub Markdown: step summary and PR comment)",
    ),
    "run": (
        (CLI + "run",),
        "evaluate an agent command on a suite (k trials per task) and print the scorecard",
    ),
    "wrap": ((CLI + "wrap",), "run a stdio MCP server command, recording every message"),
    "demo": (
        (CLI + "demo",),
        "evaluate two scripted agents on the helpdesk suite and open the viewer",
    ),
    "import": (
        ("tracecard.server.bfcl.cli", CLI + "cassette"),
        "write a suite from another benchmark's data",
    ),
    "audit": (
        ("tracecard.server.audit.cli",),
        "run the baseline agents on a suite and flag tasks that cannot measure anything",
    ),
    "worker": (
        ("tracecard.server.jobs.worker",),
        "run queued cells (experiment x task x trial) of the database's experiments",
    ),
    "experiment": (
        ("tracecard.server.jobs.experiment_cli",),
        "an experiment's cells as jobs: show, resume, rerun, cancel",
    ),
}
# Every module with a `register(sub)`, in registration order (cassette's goes under `import`).
MODULES = tuple(dict.fromkeys(m for modules, _ in COMMANDS.values() for m in modules))
TOP_FLAGS_WITH_VALUE = ("--log-level",)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tracecard.server.app import asgi_app
    from tracecard.server.cli.common import bind_socket, check_database, settings_from_args
    from tracecard.server.serving import TracecardServer, server_options

    settings = settings_from_args(args, host=args.host, port=args.port, db=args.db)
    sock = bind_socket(settings.host, settings.port)  # a taken port: nothing created yet
    check_database(settings.db)
    settings = settings.model_copy(update={"port": sock.getsockname()[1]})
    print(f"tracecard serving on {settings.base_url}  (viewer: {settings.base_url}/)", flush=True)
    print(f"  OTLP/HTTP traces endpoint: {settings.base_url}/v1/traces", flush=True)
    if settings.upstreams:
        for name, upstream in settings.upstreams.items():
            where = _upstream_line(settings, name, upstream)
            print(f"  upstream {name}: {settings.base_url}{where}", flush=True)
    else:
        print(
            "  no upstreams configured: add [upstreams.NAME] to tracecard.toml "
            "(in this folder, or pass --config PATH)",
            flush=True,
        )
    config = uvicorn.Config(
        asgi_app(settings),
        loop="uvloop",
        log_level=args.log_level,
        **server_options(settings),
    )
    TracecardServer(config).run(sockets=[sock])
    return 0


def _upstream_line(settings: Settings, name: str, upstream: UpstreamSettings) -> str:
    """Where agents reach the upstream (by its kind), and a fixture folder that is missing."""
    from tracecard.server.settings import MODEL_KINDS

    if upstream.kind in MODEL_KINDS:
        path = f"/llm/{name}  (the model SDK's base URL)"
    else:
        path = f"/http/{name}/" if upstream.kind == "http" else f"/mcp/{name}"
    if upstream.fixture and not settings.resolve_path(upstream.fixture).is_dir():
        path += f"  (warning: fixture {settings.resolve_path(upstream.fixture)} is not a folder)"
    return path


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += [child, *_subparsers(child)]
    return found


def build_parser() -> argparse.ArgumentParser:
    """The `tracecard` argument parser: every command and its options (inside `main`: only
    what the arguments being parsed need, see `parser_for`)."""
    return parser_for(*_wanted)


# What `main` parses, for the `build_parser()` call in it: (the command, stubs only).
_wanted: tuple[str | None, bool] = (None, False)


def parser_for(command: str | None = None, stubs: bool = False) -> argparse.ArgumentParser:
    """The parser with every command (`command` None), or with `command`'s modules only
    (their other commands come along), or with `stubs`: no module at all, every command by
    name and help only (enough for `--help` and `--version`)."""
    parser = argparse.ArgumentParser(
        prog="tracecard",
        description="Trace-aware evaluation server for tool-calling agents: a recording MCP/HTTP "
        "proxy, decomposed scorers, repeated-run statistics and a web viewer.",
    )
    parser.add_argument("--version", action="version", version=f"tracecard {__version__}")
    add_common_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if stubs:
        for name, (_, help_text) in COMMANDS.items():
            sub.add_parser(name, help=help_text)
        return parser
    if command is None or command == "serve":
        _add_serve(sub)
    modules = MODULES if command is None else COMMANDS[command][0]
    for name in modules:
        importlib.import_module(name).register(sub)
    for child in _subparsers(parser):
        add_common_flags(child)
    return parser


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the proxy, the JSON API and the viewer",
        description="Run the recording proxy, the JSON API and the viewer in one process.",
    )
    serve.add_argument(
        "--config", help="path to tracecard.toml (default: ./tracecard.toml or a parent's)"
    )
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=None, help="port to bind (default 7800; 0: any free port)"
    )
    serve.add_argument(
        "--db", default=None, help="database URL or SQLite file (default .tracecard/tracecard.db)"
    )
    serve.set_defaults(handler=_serve)


def command_of(argv: Sequence[str]) -> str | None:
    """The command word of `argv` (the first argument that is not a top-level flag or its
    value), or None when there is none (`--help`, `--version`, nothing)."""
    after_flag = False
    for arg in argv:
        if after_flag:
            after_flag = False
        elif arg == "--":
            return arg  # (not a command: parsed with every command, as before)
        elif arg.startswith("-"):
            # `--log-level LEVEL` (or an abbreviation argparse accepts): the next is its value
            after_flag = "=" not in arg and any(
                len(arg) > 2 and flag.startswith(arg) for flag in TOP_FLAGS_WITH_VALUE
            )
        else:
            return arg
    return None


def _smallest_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The smallest parser that parses `argv` as the full one would."""
    global _wanted
    command = command_of(argv)
    _wanted = (None, True) if command is None else (command if command in COMMANDS else None, False)
    try:
        return build_parser()
    finally:
        _wanted = (None, False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tracecard` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = _smallest_parser(argv)  # imports the command's modules: a Ctrl-C may come now
    except KeyboardInterrupt:
        return 130
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except (ConfigError, RunError) as exc:
        if args.debug:
            raise
        print(f"tracecard: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a file or folder given that cannot be used (`-o`, `--dir`, ...)
        if args.debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"tracecard: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"tracecard: {type(exc).__name__}: {first}", file=sys.stderr)
        print("tracecard: unexpected: run again with --debug for the traceback", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
