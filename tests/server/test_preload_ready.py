"""A per-run process is told the `preload` helper's socket only once the helper listens: a
process started while the helper was still importing was handed a path nothing listened on, and
the BFCL relay then started its server cold (7 of a 20-run experiment's first runs, ~1 s of CPU
each; docs/PERFORMANCE.md, 2026-12-03 night)."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracecard.server.settings import Settings
from tracecard.server.stdio.preload import PRELOAD_VARIABLE, Preloads

# A helper that imports slowly: it listens and says `ready` after 1.5 s.
HELPER = """
import socket, sys, time
time.sleep(1.5)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(8)
print("ready", flush=True)
while True:
    listener.accept()[0].close()
"""


def _listens(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
        except OSError:
            return False
        return True


def test_a_process_started_while_the_helper_imports_waits_for_ready(tmp_path: Path) -> None:
    helper = tmp_path / "helper.py"
    helper.write_text(HELPER)
    settings = Settings.model_validate(
        {
            "upstreams": {
                "slow": {
                    "command": [sys.executable, "-c", "pass"],
                    "preload": [sys.executable, str(helper), "{preload}"],
                    "per_run": True,
                }
            }
        }
    )
    runtime: Any = SimpleNamespace(settings=settings)
    preloads = Preloads(runtime)

    async def scenario() -> list[bool]:
        async def one(delay: float) -> bool:
            await asyncio.sleep(delay)
            env = await preloads.env("slow")
            return _listens(env[PRELOAD_VARIABLE])  # what a relay does first

        try:  # the first run starts the helper; two more ask while it imports
            return list(await asyncio.gather(one(0), one(0.3), one(0.8)))
        finally:
            await preloads.stop()

    assert asyncio.run(scenario()) == [True, True, True]
