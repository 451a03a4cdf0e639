"""Spans are inserted in statements of `SQLITE_CHUNK` rows on SQLite (one `sqlite3_step`, so one
GIL hand-off, a chunk instead of a row): batches that fill several chunks and leave a remainder
behave as a row-by-row insert did. Real SQLite and PostgreSQL (the `store` fixture)."""

from __future__ import annotations

from typing import Any

from tracecard.traces.span_rows import SQLITE_CHUNK
from tracecard.traces.store import Store

RUN = "r-chunks"


def _span(index: int, trace_id: str | None = "cd" * 16) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": f"{index:016x}",
        "name": f"tools/call step{index}",
        "start_time_unix_nano": 1_000 + index,
        "end_time_unix_nano": 2_000 + index,
        "attributes": {"tracecard.run.id": RUN, "gen_ai.tool.name": f"tool{index % 3}"},
    }


def _stored(store: Store) -> list[str]:
    return [span["span_id"] for span in store.spans_for_run(RUN)]


def test_two_chunks_and_a_remainder_store_every_span_once(store: Store) -> None:
    count = 2 * SQLITE_CHUNK + 7
    assert store.insert_spans([_span(i) for i in range(count)]) == count
    stored = store.spans_for_run(RUN)
    assert [s["span_id"] for s in stored] == [f"{i:016x}" for i in range(count)]
    # every column of a chunked row lands in its own place (the parameters are flattened)
    last = stored[SQLITE_CHUNK + 3]
    assert last["name"] == f"tools/call step{SQLITE_CHUNK + 3}"
    assert last["end_time_unix_nano"] == 2_000 + SQLITE_CHUNK + 3
    assert last["attributes"]["gen_ai.tool.name"] == f"tool{(SQLITE_CHUNK + 3) % 3}"


def test_ids_already_stored_or_repeated_in_a_chunk_are_kept_once(store: Store) -> None:
    store.insert_spans([_span(5)])
    first = store.spans_for_run(RUN)[0]
    batch = [_span(i) for i in range(SQLITE_CHUNK)]  # holds id 5 again
    batch[10] = _span(3)  # id 3 twice in one statement
    batch[5]["name"] = "a second copy"
    assert store.insert_spans(batch) == SQLITE_CHUNK
    stored = store.spans_for_run(RUN)
    assert len(stored) == SQLITE_CHUNK - 1  # 10 was replaced by a second 3
    assert [s for s in stored if s["span_id"] == f"{5:016x}"] == [first]  # the first copy stays


def test_a_bad_row_inside_a_chunk_costs_only_itself(store: Store) -> None:
    count = SQLITE_CHUNK + 10
    batch = [_span(i) for i in range(count)]
    batch[20] = _span(20, trace_id=None)  # NOT NULL, in the middle of the first chunk
    written = store.insert_spans(batch)
    assert written == count - 1
    assert _stored(store) == [f"{i:016x}" for i in range(count) if i != 20]
    assert store.health.dropped == 1
