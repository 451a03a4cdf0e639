"""BFCL (the Berkeley Function-Calling Leaderboard) through tracecard: `tracecard import bfcl`
writes suites from PyPI `bfcl-eval`'s data, and an MCP server exposes an entry's tools.

`bfcl-eval` is an optional extra (`pip install 'tracecard[bfcl]'`); nothing of it is copied here.
"""
