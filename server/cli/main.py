"""The `tracecard` command line. Each subcommand lives in its own module and registers here.

Conventions (docs/scorecards.md lists the exit codes): `--config PATH` is always the
tracecard.toml (found in the current folder or a parent when not given); `--log-level` and
`--debug` work on every command; an error is one or two lines (a traceback only with `--debug`);
exit 0 ok, 1 the answer is "no" (gate failed, runs errored), 2 bad usage or input, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tracecard import __version__
from tracecard.server.cli.common import (
    EXIT_USAGE,
    add_common_flags,
    bind_socket,
    check_database,
    configure_logging,
    settings_from_args,
)
from tracecard.server.runs.service import RunError
from tracecard.server.settings import MODEL_KINDS, ConfigError, Settings, UpstreamSettings


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tracecard.server.app import asgi_app
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
    """The `tracecard` argument parser: every command and its options."""
    parser = argparse.ArgumentParser(
        prog="tracecard",
        description="Trace-aware evaluation server for tool-calling agents: a recording MCP/HTTP "
        "proxy, decomposed scorers, repeated-run statistics and a web viewer.",
    )
    parser.add_argument("--version", action="version", version=f"tracecard {__version__}")
    add_common_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    # Each command module adds its subcommands; imported here so `--help` lists them all.
    from tracecard.server.audit import cli as audit
    from tracecard.server.bfcl import cli as bfcl
    from tracecard.server.cli import cassette, demo, run, suites, wrap

    for module in (suites, run, wrap, demo, bfcl, audit):
        module.register(sub)
    cassette.register(sub)  # under `tracecard import`, which bfcl adds
    for child in _subparsers(parser):
        add_common_flags(child)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tracecard` console script."""
    try:
        parser = build_parser()  # imports most of tracecard: a Ctrl-C may come this early
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
