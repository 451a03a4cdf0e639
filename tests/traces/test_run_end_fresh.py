"""A run ended by a process that has not used the ORM yet (#24): `Store.insert_run`,
`read_run` and `end_run` go through SQLAlchemy Core, and `detached_run` builds the row with
`RunRow.model_construct`, whose attributes need the ORM's mappers configured. A server whose
first work is an MCP session (insert the ad-hoc run, end it on DELETE) must end it all the same.
Run in a new interpreter: in this one, other tests have configured the mappers long ago."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.processes import fresh_interpreter


def end_in_a_fresh_process(folder: Path) -> dict[str, Any]:
    from tracecard.traces.migrate import upgrade
    from tracecard.traces.run_summary import end_run
    from tracecard.traces.store import Store

    store = Store(f"sqlite:///{folder}/fresh.db")
    upgrade(store)
    fields = {"id": "a" * 16, "trace_id": "b" * 32, "root_span_id": "c" * 16}
    store.insert_run({**fields, "status": "running", "adhoc_key": "session:x"})
    ended = end_run(store, fields["id"], "agent/1", finish=True, index=True, status="finished")
    assert ended is not None
    row, summary = ended
    stored = store.read_run(fields["id"])
    assert stored is not None
    store.dispose()
    return {
        "id": row.id,
        "status": row.status,
        "client": row.client,
        "stored_status": stored["status"],
        "finished": stored["finished_at"] is not None,
        "calls": summary.calls,
    }


def test_a_fresh_process_ends_a_run_without_having_used_the_orm(tmp_path: Path) -> None:
    found = fresh_interpreter(__file__, str(tmp_path))
    assert found == {
        "id": "a" * 16,
        "status": "finished",
        "client": "agent/1",
        "stored_status": "finished",
        "finished": True,
        "calls": 0,
    }


if __name__ == "__main__":
    print(json.dumps(end_in_a_fresh_process(Path(sys.argv[1]))))
