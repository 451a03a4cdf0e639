"""A row no database takes, even in its readable form, goes to the dead-letter file.

Real SQLite and PostgreSQL (the `store` fixture); the bad row has no trace id, which every
database refuses (NOT NULL) however its strings and numbers are cleaned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracecard.traces.deadletter import DeadLetters
from tracecard.traces.store import Store


def _span(index: int, trace_id: str | None = "ab" * 16) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": f"{index:016x}",
        "name": f"tools/call step{index}",
        "start_time_unix_nano": 1_000 + index,
        "attributes": {"tracecard.run.id": "r-dead", "big": 2**70},  # past 64 bits: kept
    }


def test_an_unstorable_row_is_kept_in_the_dead_letter_file(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "spool" / "dead-letter.jsonl"
    store.dead_letters = DeadLetters(path, max_bytes=1024 * 1024)
    written = store.insert_spans([_span(1), _span(2, trace_id=None), _span(3)])
    assert written == 2  # the others of the batch are stored
    assert [s["span_id"] for s in store.spans_for_run("r-dead")] == [f"{1:016x}", f"{3:016x}"]
    assert store.health.dropped == 1 and store.health.dead_lettered == 1
    [line] = path.read_text().splitlines()
    kept = json.loads(line)
    assert kept["span"]["span_id"] == f"{2:016x}" and kept["span"]["trace_id"] is None
    assert kept["span"]["attributes"]["big"] == 2**70  # as it was, not as the database saw it
    assert kept["error"] and kept["time"]


def test_the_dead_letter_file_is_bounded(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "dead-letter.jsonl"
    store.dead_letters = dead = DeadLetters(path, max_bytes=1500)
    for index in range(10):
        store.insert_spans([_span(100 + index, trace_id=None)])
    assert store.health.dropped == 10
    assert 0 < dead.written < 10 and dead.full == 10 - dead.written
    assert store.health.dead_lettered == dead.written
    assert path.stat().st_size <= 1500  # never past the bound
    assert len(path.read_text().splitlines()) == dead.written
