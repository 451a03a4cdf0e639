"""One finished run in a fresh store, with a root span, for page tests that build its other
spans themselves (tests/viewer/data.py has the span builders): `OneRun.page()` serves the run's
trace page through the real app, in process."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from tests.viewer.conftest import IN_PROCESS_URL
from tests.viewer.data import _hex, _span
from tracecard.server.app import asgi_app
from tracecard.server.settings import Settings
from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store


@dataclass
class OneRun:
    folder: Path
    run: RunRow
    at: int  # the root span's start (ns)
    root: dict[str, Any]

    async def page(self, *spans: dict[str, Any]) -> str:
        """The run's trace page, with its root and `spans` stored."""
        url = f"sqlite:///{self.folder / 'tracecard.db'}"
        store = Store(url)
        store.create_schema()
        try:
            store.add_run(self.run)
            store.insert_spans([self.root, *spans])
            settings = Settings(db=url, sandbox_root=str(self.folder / "sandboxes"))
            async with AsyncTestClient(asgi_app(settings, store), base_url=IN_PROCESS_URL) as c:
                return (await c.get(f"/runs/{self.run.id}")).text
        finally:
            store.dispose()


def one_run(folder: Path, task: str, config: str, ms: int = 3000) -> OneRun:
    """A finished run of `task` by `config`, started five minutes ago, its root `ms` long."""
    created = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    run = RunRow(id=_hex(8), task_id=task, config_name=config, status="finished",
                 trace_id=_hex(16), root_span_id=_hex(8), created_at=created)  # fmt: skip
    at = int(created.timestamp() * 1e9)
    root = _span(run, f"invoke_agent {config}", at, ms, None, kind=sc.KIND_INTERNAL,
                 span_id=run.root_span_id)  # fmt: skip
    return OneRun(folder, run, at, root)


def text_of(part: str) -> str:
    """Page HTML as the words a person reads (tags dropped, spaces folded)."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part)))


def transcript_of(page: str) -> str:
    """The "What happened" section's HTML."""
    start = page.index('id="tr-h"')
    return page[start : page.index("</section>", start)]
