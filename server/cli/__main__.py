"""`python -m tracecard.server.cli`: the `tracecard` command without its console script."""

import sys

from tracecard.server.cli.main import main

sys.exit(main())
