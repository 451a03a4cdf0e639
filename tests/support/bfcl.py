"""A tracecard serving BFCL's upstreams (as `tracecard import bfcl` configures them) with one
imported BFCL suite loaded: the server the BFCL end-to-end tests drive their agents through."""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import Iterator
from pathlib import Path

from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.client import TracecardClient
from tracecard.scorers import Suite, dump_suite
from tracecard.server.bfcl.importer import upstream_config
from tracecard.server.settings import Settings


@contextlib.contextmanager
def bfcl_tracecard(folder: Path, suite: Suite) -> Iterator[RunningServer]:
    settings = Settings.model_validate(
        {
            "db": f"sqlite:///{folder / 'tracecard.db'}",
            "sandbox_root": str(folder / "sandboxes"),
            "upstreams": tomllib.loads(upstream_config())["upstreams"],
            "recording": {"batch_delay_ms": 50},
        }
    )
    with running_tracecard(settings) as running, TracecardClient(running.url) as client:
        client.add_suite(dump_suite(suite))
        yield running
