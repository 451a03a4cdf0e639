"""The recorder's rows are queued without the SDK's per-span `os.getpid()` check
(`StoringBatchProcessor.emit_row`); a forked child still records, through the worker the SDK
re-arms with `os.register_at_fork`. Real fork, real SQLite file, a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from tests.support.processes import fresh_interpreter

SCRIPT = str(Path(__file__).with_name("fork_emit.py"))


def test_a_forked_child_stores_the_rows_it_emits(tmp_path: Path) -> None:
    result = fresh_interpreter(SCRIPT, str(tmp_path / "fork.db"), timeout=120)
    assert result["child_exit"] == 0
    assert result["stored"] == [f"{1:016x}", f"{2:016x}"]
