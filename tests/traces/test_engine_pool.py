"""A SQLite file's connections are kept between bursts (`SQLITE_POOL` in traces/engine.py): threads
that use the store at once reuse the connections an earlier burst opened, instead of opening
and tuning new ones each time (32 sessions closed together end 32 runs in worker threads)."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event, text

from tracecard.traces.engine import make_engine

AT_ONCE = 32


def _burst(engine: object) -> None:
    """`AT_ONCE` threads, each holding a connection until all of them hold one."""
    together = threading.Barrier(AT_ONCE, timeout=30)
    failures: list[BaseException] = []

    def use() -> None:
        try:
            with engine.connect() as connection:  # type: ignore[attr-defined]
                connection.execute(text("select count(*) from sqlite_master")).scalar()
                together.wait()
        except BaseException as exc:  # noqa: BLE001  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=use) for _ in range(AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures


def test_a_second_burst_opens_no_connection(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'tracecard.db'}")
    opened: list[int] = []
    event.listen(engine, "connect", lambda *_args: opened.append(1))
    try:
        _burst(engine)
        first = len(opened)
        _burst(engine)
        assert first == AT_ONCE  # each thread held its own connection at the barrier
        assert len(opened) == first  # and the next burst found them all kept
        with engine.connect() as connection:  # each one tuned when it was opened
            mode = connection.execute(text("pragma journal_mode")).scalar()
        assert mode == "wal"
    finally:
        engine.dispose()
