"""The demo's helpdesk MCP server (tickets, users, files), the command tracecard starts per run.

    python examples/helpdesk/server.py SANDBOX              # stdio (how tracecard runs it)
    python examples/helpdesk/server.py SANDBOX --http 9000  # streamable HTTP at :9000/mcp

The state lives in SANDBOX/state.json (copied from fixture/ when absent), so every trial starts
from the same state and outcome probes can read it afterwards. The tools are in helpdesk.py.

With HELPDESK_PRELOADED=SOCKET (set by `tracecard demo`), this process is only a relay: a
preloaded helpdesk (preload.py) forks a server onto this process's stdin and stdout, so a run
does not pay the MCP SDK's import (about a CPU-second) again. It behaves the same either way.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Serve one state directory over stdio (default) or streamable HTTP (`--http PORT`)."""
    parser = argparse.ArgumentParser(description="The tracecard demo's helpdesk MCP server.")
    parser.add_argument("state_dir", help="directory holding state.json (the run's sandbox)")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    args = parser.parse_args(argv)
    preloaded = os.environ.get("HELPDESK_PRELOADED")
    if preloaded and args.http is None:
        from preload import relay  # light: sockets only

        return relay(preloaded, args.state_dir)
    from helpdesk import serve  # imports the MCP SDK

    serve(args.state_dir, args.http)
    return 0


if __name__ == "__main__":
    sys.exit(main())
