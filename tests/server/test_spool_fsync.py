"""The server's spool is as durable as the database behind it (`recording.spool_fsync`): each
batch fsync'd on PostgreSQL, whose commits survive a power loss; written to the kernel only on
SQLite, whose WAL with `synchronous=NORMAL` keeps commits across a crash of the process, not
of the machine. Either way a SIGKILL loses nothing logged (tests/traces/test_spool.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracecard.server.runtime import make_tracer_provider
from tracecard.server.settings import RecordingSettings, Settings
from tracecard.traces.store import Store


def _spool_fsyncs(
    store: Store, spool_fsync: bool | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> int:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    settings = Settings(
        db=store.url,
        recording=RecordingSettings(spool_fsync=spool_fsync, spool_dir=str(tmp_path / "spool")),
    )
    provider, processor = make_tracer_provider(store, settings)
    try:
        tracer = provider.get_tracer("test")
        for index in range(20):
            with tracer.start_as_current_span(
                f"call {index}", attributes={"tracecard.run.id": "r"}
            ):
                pass
        assert processor.force_flush()
        assert len(store.spans_for_run("r")) == 20
    finally:
        provider.shutdown()
    return len(synced)


def test_by_default_as_durable_as_the_database(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _spool_fsyncs(store, None, tmp_path, monkeypatch)
    if store.url.startswith("sqlite"):
        assert synced == 0
    else:
        assert synced >= 1


@pytest.mark.parametrize("spool_fsync", [True, False])
def test_the_setting_wins(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spool_fsync: bool
) -> None:
    synced = _spool_fsyncs(store, spool_fsync, tmp_path, monkeypatch)
    assert (synced >= 1) if spool_fsync else (synced == 0)
