"""Fixtures for the scorer tests; span and task builders live in trace_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tests/ is on sys.path (rootdir conftest), so tests/scorers would shadow the real package as a
# namespace portion; the project root must come first. (`pythonpath = ["."]` in pytest config
# makes this a no-op.)
_ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[0] != _ROOT:
    sys.path.insert(0, _ROOT)
if getattr(sys.modules.get("scorers"), "__file__", None) is None:
    for _name in [n for n in sys.modules if n == "scorers" or n.startswith("scorers.")]:
        del sys.modules[_name]

from scorers import RunFacts  # noqa: E402


@pytest.fixture
def finished() -> RunFacts:
    """Facts of a run that ended on its own with an answer and a sandbox."""
    return RunFacts(status="finished", final_answer="done", sandbox="/sandbox/run-1")
