"""A stored suite is parsed once per version, not once per run (a 200-task BFCL suite took 0.4 s
of CPU per run start) nor once per trace page: the scorer service's task_of and the viewer's
run_task share one cache (scorers.suite_cache), which never confuses two versions."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from tracecard.scorers import suite_cache
from tracecard.server.evaluation import service
from tracecard.server.runs.service import RunError
from tracecard.traces.store import Store
from tracecard.viewer.task_view import run_task

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
    real = suite_cache.parse_suite

    def counting(text: str, fmt: Any, source: str) -> Any:
        parsed.append(text)
        return real(text, fmt, source)

    monkeypatch.setattr(suite_cache, "parse_suite", counting)
    unique = uuid.uuid4().hex  # versions no other test in this process has parsed
    _, first = service.store_suite(store, SUITE.format(text=f"one {unique}"), "toml", "s.toml")
    _, second = service.store_suite(store, SUITE.format(text=f"two {unique}"), "toml", "s.toml")

    def run(version: str, task: str) -> Any:
        return SimpleNamespace(id="r", suite_name="cache", suite_version=version, task_id=task)

    tasks = [
        service.task_of(store, run(v, t))
        for v in (first.version, second.version) * 3
        for t in ("a", "b")
    ]
    expected = [f"one {unique}", f"two {unique}"] * 3
    assert [t.instruction for t in tasks if t is not None and t.id == "a"] == expected
    assert len(parsed) == 2 and f"one {unique}" in parsed[0] and f"two {unique}" in parsed[1]
    # The trace page's task comes from the same cache: nothing is parsed again.
    viewed = run_task(store, run(second.version, "a"))  # type: ignore[arg-type]
    assert viewed is not None and viewed.instruction == f"two {unique}"
    assert len(parsed) == 2
    with pytest.raises(RunError, match="no longer stored"):
        service.task_of(store, run("f" * 64, "a"))
    store.dispose()
