"""Spans that could not be stored even in their readable form: kept on disk, not lost.

One JSON line per span (`{"time", "error", "span"}`), appended and fsync'd, in a file beside
the spool (`dead-letter.jsonl`). The file is bounded: a span that would take it past
`max_bytes` is not written (counted as `full`), so a database that refuses everything cannot
fill the disk. Nothing reads the file back: it is for a person (or a script) to inspect and
replay.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEAD_LETTER_NAME = "dead-letter.jsonl"


class DeadLetters:
    """The dead-letter file of one store; safe to use from any thread."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.written = 0  # spans written to the file by this process
        self.full = 0  # spans not written: the file had reached `max_bytes`
        self._lock = threading.Lock()

    def keep(self, span: dict[str, Any], error: str) -> bool:
        """Append `span` with why it failed; False when it could not be (file full, I/O)."""
        line = _line(span, error)
        with self._lock:
            try:
                size = self.path.stat().st_size if self.path.exists() else 0
                if size + len(line) > self.max_bytes:
                    self.full += 1
                    return False
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "ab") as handle:
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                log.error("the dead-letter file %s could not be written: %s", self.path, exc)
                return False
            self.written += 1
            return True


def _line(span: dict[str, Any], error: str) -> bytes:
    """The span as one JSON line, whatever is in it (numbers past 64 bits, lone surrogates)."""
    record: dict[str, Any] = {"time": datetime.now(UTC).isoformat(), "error": error}
    try:
        text = json.dumps({**record, "span": span}, default=repr, ensure_ascii=True)
    except (ValueError, RecursionError):  # nested too deep, or circular: keep its repr
        text = json.dumps({**record, "span_repr": repr(span)[:1_000_000]}, ensure_ascii=True)
    return text.encode() + b"\n"
