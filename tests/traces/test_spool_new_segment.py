"""A new spool segment is never visible unlocked: another spool's delivery that runs between
the segment's creation and its lock must not take it for a dead process's and remove it (the
process would then log its batches into a file nobody can deliver after a SIGKILL).

The delivery is run at that exact moment by wrapping the spool's `fcntl.flock`, on real files."""

from __future__ import annotations

import fcntl
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
