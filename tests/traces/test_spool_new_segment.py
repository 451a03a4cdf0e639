"""A new spool segment is never visible unlocked: another spool's delivery that runs between
the segment's creation and its lock must not take it for a dead process's and remove it (the
process would then log its batches into a file nobody can deliver after a SIGKILL).

The delivery is run at that exact moment by wrapping the spool's `fcntl.flock`, on real files.
A process that dies between the creation and the rename leaves an empty `.new` file: delivery
removes it once it is old and unlocked."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest

from tests.traces.test_spool import _spans
from tracecard.traces import spool as spool_module
from tracecard.traces.spool import Spool


def test_a_delivery_while_a_segment_is_created_leaves_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spool" / "spans.jsonl"
    writer, other = Spool(path), Spool(path)
    sent: list[list[Any]] = []
    real_flock = fcntl.flock
    raced: list[int] = []

    def flock(handle: Any, operation: int) -> None:
        if operation == fcntl.LOCK_EX and not raced:  # the segment's own lock, not yet taken
            raced.append(other.deliver(lambda batch: sent.append(batch) or True))
        real_flock(handle, operation)

    monkeypatch.setattr(spool_module.fcntl, "flock", flock)
    segment = writer.log(_spans(3))
    monkeypatch.setattr(spool_module.fcntl, "flock", real_flock)

    assert raced == [0] and sent == []  # the delivery found nothing of the writer's to take
    _, on_disk = writer._segments[segment]
    assert on_disk.exists() and len(on_disk.read_bytes().splitlines()) == 3
    writer.close()  # the process ends without storing the batch (as a SIGKILL leaves it)
    later = Spool(path)
    assert later.deliver(lambda batch: sent.append(batch) or True) == 3
    assert [span["span_id"] for span in sent[0]] == [s["span_id"] for s in _spans(3)]


def _unseen(folder: Path, name: str, age_s: float, content: bytes = b"") -> Path:
    """A `.new` file as a process that died between a segment's creation and its rename left
    it, `age_s` seconds old."""
    path = folder / name
    path.write_bytes(content)
    old = path.stat().st_mtime - age_s
    os.utime(path, (old, old))
    return path


def test_delivery_removes_a_dead_process_empty_new_segment(tmp_path: Path) -> None:
    path = tmp_path / "spool" / "spans.jsonl"
    spool = Spool(path)
    path.parent.mkdir(parents=True)
    stale = _unseen(path.parent, "spans.dead-1.0.jsonl.new", 120)
    fresh = _unseen(path.parent, "spans.live-1.0.jsonl.new", 0)  # a live process, mid-rename
    held = _unseen(path.parent, "spans.live-2.0.jsonl.new", 120)
    with open(held, "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # its process is alive: it holds the lock
        assert spool.deliver(lambda batch: True) == 0
        assert not stale.exists()
        assert fresh.exists() and held.exists()
    spool.close()


def test_a_new_segment_with_spans_in_it_is_delivered_not_removed(tmp_path: Path) -> None:
    # no process writes into a segment before its rename; were it ever to, nothing is lost
    path = tmp_path / "spool" / "spans.jsonl"
    writer = Spool(path)
    segment = writer.log(_spans(2))
    _, on_disk = writer._segments[segment]
    content = on_disk.read_bytes()
    writer.close()
    on_disk.unlink(missing_ok=True)
    _unseen(path.parent, "spans.dead-2.0.jsonl.new", 120, content)
    sent: list[list[Any]] = []
    assert Spool(path).deliver(lambda batch: sent.append(batch) or True) == 2
    assert [s["span_id"] for s in sent[0]] == [s["span_id"] for s in _spans(2)]
    assert not list(path.parent.glob("*.new"))
