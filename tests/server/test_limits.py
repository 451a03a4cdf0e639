"""Experiment size (tasks x trials) has a cap with an error that says what to change (real
SQLite and PostgreSQL); a refused experiment creates no run."""

from __future__ import annotations

from pathlib import Path

from litestar.testing import AsyncTestClient
from sqlmodel import func, select

from tests.server.test_evaluation_api import SUITE
from tracecard.server.app import create_app
from tracecard.server.settings import Settings
from tracecard.traces.models import RunRow
from tracecard.traces.store import Store


async def test_experiment_over_the_run_cap_is_refused_with_what_to_change(
    db_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        db=db_url,
        sandbox_root=str(tmp_path / "sandboxes"),
        max_experiment_runs=5,
        upstreams={"tools": {"url": "http://127.0.0.1:9/mcp"}},
    )
    store = Store(db_url)
    async with AsyncTestClient(create_app(settings, store)) as client:
        posted = await client.post(
            "/api/suites", content=SUITE, headers={"content-type": "application/toml"}
        )
        assert posted.status_code == 201, posted.text
        body = {"suite": "notes", "config": {"name": "big"}, "trials": 3}  # 2 tasks x 3 = 6
        refused = await client.post("/api/experiments", json=body)
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"]
        assert "2 tasks x 3 trials is 6 runs, over the limit of 5" in detail
        assert "at most 2 trials" in detail and "max_experiment_runs" in detail
        with store.session() as session:
            assert session.exec(select(func.count()).select_from(RunRow)).one() == 0
        allowed = await client.post("/api/experiments", json={**body, "trials": 2})
        assert allowed.status_code == 201, allowed.text
        assert len(allowed.json()["runs"]) == 4
    store.dispose()
