"""A run that was created but has not started (no span yet) says `pending`, the status the
filter and the trace page use, never `running`."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from litestar.testing import AsyncTestClient

from tests.viewer.conftest import IN_PROCESS_URL
from tracecard.server.app import asgi_app
from tracecard.server.settings import Settings
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store


async def test_a_run_not_started_is_pending_in_the_runs_list(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tracecard.db'}"
    store = Store(url)
    store.create_schema()
    now = datetime.now(UTC)
    ids = {status: secrets.token_hex(8) for status in ("pending", "running")}
    with store.session() as session:
        for status, run_id in ids.items():
            session.add(RunRow(id=run_id, task_id=f"t-{status}", config_name="c", status=status,
                               trace_id=secrets.token_hex(16), root_span_id=secrets.token_hex(8),
                               created_at=now))  # fmt: skip
        session.commit()
    settings = Settings(db=url, sandbox_root=str(tmp_path / "sandboxes"))
    try:
        async with AsyncTestClient(asgi_app(settings, store), base_url=IN_PROCESS_URL) as client:
            page = (await client.get("/runs")).text
            for status, run_id in ids.items():
                row = re.search(rf'<tr id="run-{run_id}".*?</tr>', page, re.S)
                assert row is not None, status
                word = re.search(r'class="verdict-word v-(\w+)">([^<]+)<', row.group(0))
                assert word is not None and word.groups() == (status, status)
            pending = (await client.get("/runs?status=pending")).text
            assert f"run-{ids['pending']}" in pending and f"run-{ids['running']}" not in pending
            trace = (await client.get(f"/runs/{ids['pending']}")).text
            assert 'class="status s-pending">pending<' in trace and "s-running" not in trace
    finally:
        store.dispose()
