"""The `tracecard` command line: one module per command, registered in `main`."""

from tracecard.server.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
