"""Fixtures for the scorer tests; span and task builders live in trace_helpers.py."""

from __future__ import annotations

import pytest

from tracecard.scorers import RunFacts


@pytest.fixture
def finished() -> RunFacts:
    """Facts of a run that ended on its own with an answer and a sandbox."""
    return RunFacts(status="finished", final_answer="done", sandbox="/sandbox/run-1")
