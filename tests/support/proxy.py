"""Helpers for proxy tests: a tracecard in front of given upstreams, runs, spans, raw JSON-RPC."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.tracecard import RunningServer, running_tracecard
from tracecard.server.settings import Settings

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def settings_for(
    upstreams: dict[str, dict[str, Any]], folder: Path, db: str | None = None, **overrides: Any
) -> Settings:
    """Settings proxying `upstreams`, on SQLite in `folder` by default."""
    recording = {"batch_delay_ms": 20, **overrides.pop("recording", {})}
    return Settings(
        db=db or f"sqlite:///{folder / 'tracecard.db'}",
        sandbox_root=str(folder / "sandboxes"),
        upstreams=upstreams,
        recording=recording,
        **overrides,
    )


@contextlib.contextmanager
def tracecard_for(
    upstreams: dict[str, dict[str, Any]], folder: Path, db: str | None = None, **overrides: Any
) -> Iterator[RunningServer]:
    """A real tracecard (uvicorn, uvloop, httptools) proxying `upstreams`, on SQLite by default."""
    with running_tracecard(settings_for(upstreams, folder, db, **overrides)) as running:
        yield running


def new_run(base: str, **body: Any) -> dict[str, Any]:
    """`POST /api/runs`: a fresh run with its proxy URLs."""
    response = httpx.post(f"{base}/api/runs", json=body, timeout=10)
    assert response.status_code == 201, response.text
    run: dict[str, Any] = response.json()
    return run


def run_spans(base: str, run_id: str) -> list[dict[str, Any]]:
    """The run's spans as the JSON API returns them (flushes recording first)."""
    response = httpx.get(f"{base}/api/runs/{run_id}/spans", timeout=10)
    assert response.status_code == 200, response.text
    spans: list[dict[str, Any]] = response.json()["spans"]
    return spans


def named(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The only span with this name."""
    found = [s for s in spans if s["name"] == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r} in {[s['name'] for s in spans]}"
    return found[0]


def rpc(method: str, params: dict[str, Any] | None = None, id: int | None = 1) -> dict[str, Any]:
    """A JSON-RPC request (or notification when `id` is None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return message
