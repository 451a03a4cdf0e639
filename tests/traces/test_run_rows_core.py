"""An ad-hoc run's row without the ORM (#24: a session's open and close): `Store.insert_run`
writes the row `add_run(RunRow(**fields))` writes, and `end_run` returns the row a fresh read
gives, every field and type. On real SQLite and real PostgreSQL (the `store` fixture)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

import pytest

from tracecard.traces.models import RunRow
from tracecard.traces.run_summary import end_run
from tracecard.traces.store import Store, run_defaults


def _fields(**extra: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "id": secrets.token_hex(8),
        "trace_id": secrets.token_hex(16),
        "root_span_id": secrets.token_hex(8),
        "config_name": "adhoc",
        "status": "running",
        "adhoc_key": f"session:{secrets.token_hex(4)}",
        "client": "bench-agent/2.1",
        "created_at": now,
        "started_at": now,
        **extra,
    }


def _stored(store: Store, run_id: str) -> dict[str, Any]:
    row = store.get_run(run_id)
    assert row is not None
    return row.model_dump()


def test_insert_run_writes_the_row_the_orm_writes(store: Store) -> None:
    through_orm = _fields()
    store.add_run(RunRow(**through_orm))
    through_core = {**through_orm, "id": secrets.token_hex(8), "adhoc_key": "session:other"}
    store.insert_run(through_core)
    orm_row, core_row = _stored(store, through_orm["id"]), _stored(store, through_core["id"])
    assert core_row.pop("id") == through_core["id"]
    assert core_row.pop("adhoc_key") == "session:other"
    orm_row.pop("id"), orm_row.pop("adhoc_key")
    assert core_row == orm_row
    # the defaults the model fills in are all there, of the model's types
    assert (core_row["config"], core_row["flags"], core_row["upstreams"]) == ({}, [], [])
    assert (core_row["calls"], core_row["score_verdict"]) == (0, "not_evaluated")
    assert core_row["created_at"] == through_orm["created_at"]


def test_run_defaults_are_fresh_for_each_row() -> None:
    first, second = run_defaults(), run_defaults()
    first["upstreams"].append("shared?")
    assert second["upstreams"] == []
    assert "created_at" in first and "id" not in first  # a factory's value, and no key


def test_insert_run_is_not_for_a_trial_of_an_experiment(store: Store) -> None:
    # `add_run` also raises the experiment's trial count: a trial must go that way
    with pytest.raises(ValueError, match="add_run"):
        store.insert_run(_fields(experiment_id=secrets.token_hex(8)))


def test_end_run_returns_the_row_a_fresh_read_gives(store: Store) -> None:
    fields = _fields(started_at=None, final_answer="done", flags=["slow"])
    store.add_run(RunRow(**fields))
    ended = end_run(store, fields["id"], None, finish=True, status="finished", end_reason="idle")
    assert ended is not None
    row, _summary = ended
    returned = row.model_dump()
    assert returned == _stored(store, fields["id"])
    assert (returned["status"], returned["end_reason"], returned["flags"]) == (
        "finished",
        "idle",
        ["slow"],
    )
    # no spans: started when it was created, and every datetime as the ORM reads it
    assert returned["started_at"] == returned["created_at"]
    assert all(
        type(returned[name]) is type(_stored(store, fields["id"])[name])
        for name in ("created_at", "started_at", "finished_at", "upstreams", "config")
    )


def test_end_run_of_no_run_is_none(store: Store) -> None:
    assert end_run(store, "0" * 16, None, finish=True) is None
    assert store.read_run("0" * 16) is None
