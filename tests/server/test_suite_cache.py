"""task_of parses a stored suite once per version, not once per run (a 200-task BFCL suite took
0.4 s of CPU per run start), and never confuses two versions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tracecard.server.evaluation import service
from tracecard.server.runs.service import RunError
from tracecard.traces.store import Store

SUITE = """
schema_version = 1
name = "cache"
[[tasks]]
id = "a"
instruction = "{text}"
[[tasks]]
id = "b"
instruction = "second"
"""


def test_a_suite_is_parsed_once_per_version(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store("sqlite://")
    store.create_schema()
    parsed: list[str] = []
    real = service._suite_from_row

    def counting(row: Any) -> Any:
        parsed.append(row.version)
        return real(row)

    monkeypatch.setattr(service, "_suite_from_row", counting)
    _, first = service.store_suite(store, SUITE.format(text="one"), "toml", "s.toml")
    _, second = service.store_suite(store, SUITE.format(text="two"), "toml", "s.toml")

    def run(version: str, task: str) -> Any:
        return SimpleNamespace(id="r", suite_name="cache", suite_version=version, task_id=task)

    tasks = [
        service.task_of(store, run(v, t))
        for v in (first.version, second.version) * 3
        for t in ("a", "b")
    ]
    assert [t.instruction for t in tasks if t is not None and t.id == "a"] == ["one", "two"] * 3
    assert parsed == [first.version, second.version]
    with pytest.raises(RunError, match="no longer stored"):
        service.task_of(store, run("f" * 64, "a"))
    store.dispose()
