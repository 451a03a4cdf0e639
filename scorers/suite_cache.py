"""Parsed suites by version, one cache for the whole process: the scorer service (a run's task
at start and at scoring) and the viewer (the task at the top of a trace page) read the same
stored suites, and a version names its content, so an entry never goes stale. Without it every
run of a 200-task BFCL suite re-read and re-parsed the whole suite (0.4 s of CPU per run start,
0.55 s per rescored task).

Pure of I/O: the caller passes how to read the stored document, called only on a miss.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from .suite import Suite, parse_suite

__all__ = ["PARSED_MAX", "cached_suite"]

PARSED_MAX: Final = 16  # parsed suites kept, least recently used dropped first
_parsed: OrderedDict[str, Suite] = OrderedDict()
_lock = threading.Lock()

# () -> (suite name, stored document), or None when the version is no longer stored
StoredDocument = Callable[[], tuple[str, Mapping[str, Any]] | None]


def cached_suite(version: str, read: StoredDocument) -> Suite | None:
    """The suite stored as `version`, parsed once; None when `read` finds it no longer stored.
    A stored document that does not parse raises `SuiteError` (and is not cached)."""
    with _lock:
        suite = _parsed.get(version)
        if suite is not None:
            _parsed.move_to_end(version)
            return suite
    stored = read()
    if stored is None:
        return None
    name, document = stored
    suite = parse_suite(orjson.dumps(document).decode(), "json", f"suite {name}")
    with _lock:
        _parsed[version] = suite
        while len(_parsed) > PARSED_MAX:
            _parsed.popitem(last=False)
    return suite

