"""The store never loses a batch for one bad row (real SQLite and real PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tracecard.traces.models import RunRow
from tracecard.traces.store import Store
from tracecard.traces.writes import STORE_ERROR, DatabaseBusy

U64_MAX = (1 << 64) - 1


def _span(i: int, **overrides: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "trace_id": "ab" * 16,
        "span_id": f"{i:016x}",
        "parent_span_id": None,
        "name": f"tools/call t{i}",
        "kind": 3,
        "start_time_unix_nano": 1_700_000_000_000_000_000 + i,
        "end_time_unix_nano": 1_700_000_000_000_000_100 + i,
        "status": {"code": 0, "message": None},
        "attributes": {"tracecard.run.id": "r1", "gen_ai.tool.name": f"t{i}"},
        "events": [],
    }
    span.update(overrides)
    return span


def _by_id(store: Store) -> dict[str, dict[str, Any]]:
    return {s["span_id"]: s for s in store.spans_for_run("r1")}


def test_nul_anywhere_never_fails_the_batch(store: Store) -> None:
    nul = _span(
        1,
        name="tools/call a\x00b",
        attributes={"tracecard.run.id": "r1", "k\x00ey": "v\x00", "list": ["x\x00"]},
        events=[{"name": "e\x00", "time_unix_nano": 1, "attributes": {"a": "\x00"}}],
        status={"code": 2, "message": "bad\x00"},
        resource={"service.name": "agent\x00"},
        scope="scope\x00",
    )
    others = [_span(i) for i in range(2, 50)]
    assert store.insert_spans([*others[:20], nul, *others[20:]]) == 49
    stored = _by_id(store)
    assert len(stored) == 49
    got = stored[f"{1:016x}"]
    if store.url.startswith("sqlite"):  # SQLite keeps NUL as it is
        assert got["name"] == "tools/call a\x00b"
    else:  # PostgreSQL cannot hold it: U+FFFD in its place, in every column
        assert got["name"] == "tools/call a\ufffdb"
        assert got["attributes"]["k\ufffdey"] == "v\ufffd"
        assert got["attributes"]["list"] == ["x\ufffd"]
        assert got["events"][0]["name"] == "e\ufffd"
        assert got["status"]["message"] == "bad\ufffd"
        assert got["resource"] == {"service.name": "agent\ufffd"}
    assert store.health.dropped == 0


def test_nul_in_a_run_config_name_is_stored(store: Store) -> None:
    store.add_run(
        RunRow(
            id="rn",
            trace_id="cd" * 16,
            root_span_id="0" * 16,
            config_name="cfg\x00x",
            config={"name": "cfg\x00x"},
        )
    )
    run = store.get_run("rn")
    assert run is not None and run.config_name.startswith("cfg")
    assert run.config["name"] in ("cfg\x00x", "cfg\ufffdx")


def test_u64_times_round_trip_exactly(store: Store) -> None:
    edge = [
        _span(1, start_time_unix_nano=(1 << 63) - 1, end_time_unix_nano=1 << 63),
        _span(2, start_time_unix_nano=U64_MAX, end_time_unix_nano=U64_MAX),
        _span(3, start_time_unix_nano=0, end_time_unix_nano=None),
    ]
    assert store.insert_spans(edge) == 3
    stored = _by_id(store)
    assert stored[f"{1:016x}"]["start_time_unix_nano"] == (1 << 63) - 1
    assert stored[f"{1:016x}"]["end_time_unix_nano"] == 1 << 63
    assert stored[f"{2:016x}"]["start_time_unix_nano"] == U64_MAX
    assert stored[f"{3:016x}"]["end_time_unix_nano"] is None
    assert store.first_span_start("r1") is not None
    assert store.health.repaired == 0


def test_a_bad_row_is_kept_readable_and_the_rest_of_the_batch_stored(store: Store) -> None:
    bad = [
        _span(
            1, name="lone \ud800 surrogate", attributes={"tracecard.run.id": "r1", "s": "\udfff"}
        ),
        _span(2, start_time_unix_nano=1 << 70),  # beyond u64: no database column holds it
        _span(3, kind=1 << 40, attributes={"tracecard.run.id": "r1", "n": 1 << 80}),
    ]
    good = [_span(i) for i in range(4, 30)]
    assert store.insert_spans([*good[:10], *bad, *good[10:]]) == 29
    stored = _by_id(store)
    assert len(stored) == 29
    for i in range(4, 30):
        assert STORE_ERROR not in stored[f"{i:016x}"]["attributes"]
    surrogate = stored[f"{1:016x}"]
    assert surrogate["name"] == "lone \ufffd surrogate"
    assert surrogate["attributes"]["s"] == "\ufffd"
    assert "surrogate" in surrogate["attributes"][STORE_ERROR]
    huge = stored[f"{2:016x}"]
    assert huge["attributes"]["tracecard.store.original.start_time_unix_nano"] == str(1 << 70)
    assert "unsigned 64-bit" in huge["attributes"][STORE_ERROR]
    assert huge["attributes"]["gen_ai.tool.name"] == "t2"  # everything else kept
    assert store.health.repaired >= 2 and store.health.dropped == 0


def _hold_lock(db: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Another process that takes SQLite's write lock and keeps it for `seconds`."""
    code = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        f"time.sleep({seconds})\n"
        "c.execute('COMMIT')\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
    return holder


def _locked_store(tmp_path: Path, busy_timeout_s: float, hold_s: float) -> tuple[Store, Any]:
    db = tmp_path / "locked.db"
    store = Store(f"sqlite:///{db}", busy_timeout_s=busy_timeout_s)
    store.create_schema()
    store.dispose()
    return store, _hold_lock(db, hold_s)


def test_sqlite_locked_past_the_busy_timeout_is_retried_not_dropped(tmp_path: Path) -> None:
    store, holder = _locked_store(tmp_path, 0.2, 1.5)
    try:
        started = time.monotonic()
        assert store.insert_spans([_span(i) for i in range(1, 11)]) == 10
        assert time.monotonic() - started >= 1.0  # it did wait for the other process
    finally:
        holder.wait(10)
    assert len(_by_id(store)) == 10
    assert store.health.busy_retries >= 1 and store.health.dropped == 0
    store.dispose()


def test_a_caller_that_cannot_wait_gets_database_busy(tmp_path: Path) -> None:
    store, holder = _locked_store(tmp_path, 0.1, 2.0)
    try:
        with pytest.raises(DatabaseBusy, match="locked"):
            store.insert_spans([_span(1)], keep_trying=lambda: False)
    finally:
        holder.wait(10)
    assert store.health.dropped == 0  # the caller still has the span: nothing counted lost
    store.dispose()
