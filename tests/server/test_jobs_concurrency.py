"""What `tracecard worker --concurrency N` means (docs/workers.md), checked against DBOS itself:
one `worker_concurrency` per queue, kept in the database, set by the last worker started, for
the plain queue and each `[limits]` key's queue (capped by the key's concurrency); a worker
started with another value than the live ones says so."""

from __future__ import annotations

from pathlib import Path

from tracecard.server.jobs.engine import launch, shutdown, system_database_url
from tracecard.server.jobs.enqueue import dbos_client
from tracecard.server.jobs.limits import limit_queues
from tracecard.server.jobs.worker import concurrency_note
from tracecard.server.settings import Settings


def _stored(system_url: str, names: list[str]) -> dict[str, int | None]:
    with dbos_client(system_url) as client:
        found = {name: client.retrieve_queue(name) for name in names}
    return {name: q.worker_concurrency if q else None for name, q in found.items()}


def test_the_last_worker_started_sets_one_per_worker_limit_per_queue(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {"db": f"sqlite:///{tmp_path / 't.db'}", "limits": {"model": {"m": {"concurrency": 3}}}}
    )
    system_url = system_database_url(settings.db)
    names = ["tracecard-cells", "tracecard-cells:model:m"]
    try:
        launch(system_url, "worker-a", listen=[], queues=limit_queues(settings, 2))
        assert _stored(system_url, names) == {names[0]: 2, names[1]: 2}
        # a second worker with --concurrency 5: the rows are rewritten, for worker-a too
        launch(system_url, "worker-b", listen=[], queues=limit_queues(settings, 5))
        assert _stored(system_url, names) == {names[0]: 5, names[1]: 3}  # capped by the key
    finally:
        shutdown()


def test_a_worker_started_with_another_concurrency_says_so() -> None:
    def worker(name: str, concurrency: int, **state: object) -> dict[str, object]:
        return {"id": name, "concurrency": concurrency, "stopped": False, "recovered_by": None,
                **state}  # fmt: skip

    assert concurrency_note(4, "me", [worker("me", 4), worker("a", 4)]) is None
    gone = [worker("b", 2, stopped=True), worker("c", 8, recovered_by="a")]
    assert concurrency_note(4, "me", [worker("me", 4), *gone]) is None
    note = concurrency_note(4, "me", [worker("me", 4), worker("a", 2), worker("b", 8)])
    assert note is not None and "--concurrency 2, 8" in note
    assert "every worker now runs up to 4 cell(s) of each queue" in note
