"""The `tracecard` command line. Each subcommand lives in its own module and registers here."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tracecard.server.runs.service import RunError
from tracecard.server.settings import ConfigError, load_settings


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tracecard.server.app import asgi_app

    settings = load_settings(args.config, host=args.host, port=args.port, db=args.db)
    print(f"tracecard serving on {settings.base_url}  (viewer: {settings.base_url}/)", flush=True)
    if settings.upstreams:
        for name in settings.upstreams:
            print(f"  upstream {name}: {settings.base_url}/mcp/{name}", flush=True)
    else:
        print("  no upstreams configured: add [upstreams.NAME] to tracecard.toml", flush=True)
    uvicorn.run(
        asgi_app(settings),
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http="httptools",
        log_level=args.log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracecard",
        description="Trace-aware evaluation server for tool-calling agents: a recording MCP/HTTP "
        "proxy, decomposed scorers, repeated-run statistics and a web viewer.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run the proxy, the JSON API and the viewer",
        description="Run the recording proxy, the JSON API and the viewer in one process.",
    )
    serve.add_argument("--config", help="path to tracecard.toml (default: none)")
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 7800)")
    serve.add_argument(
        "--db", default=None, help="database URL or SQLite file (default .tracecard/tracecard.db)"
    )
    serve.add_argument("--log-level", default="warning", help="uvicorn log level")
    serve.set_defaults(handler=_serve)
    # Each command module adds its subcommands; imported here so `--help` lists them all.
    from tracecard.server.cli import demo, run, suites, wrap

    for module in (suites, run, wrap, demo):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tracecard` console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    try:
        code: int = args.handler(args)
    except ConfigError as exc:
        print(f"tracecard: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"tracecard: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
