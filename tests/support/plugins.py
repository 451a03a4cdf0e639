"""Install a scorer plug-in the way pip would: a distribution on sys.path with a
`tracecard.scorers` entry point, picked up by the default registry."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracecard.scorers import registry as scorer_registry


@contextlib.contextmanager
def installed_scorer(
    root: Path, monkeypatch: pytest.MonkeyPatch, package: str, source: str, entry: str
) -> Iterator[None]:
    """`package/__init__.py` = `source`, declared as `entry` (`name = package:function`)."""
    site = root / "site"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(source)
    info = site / f"{package}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[tracecard.scorers]\n{entry}\n")
    monkeypatch.syspath_prepend(str(site))
    scorer_registry._default_scorers.cache_clear()
    try:
        yield
    finally:
        monkeypatch.undo()
        sys.modules.pop(package, None)  # a later install under the same name imports afresh
        scorer_registry._default_scorers.cache_clear()
