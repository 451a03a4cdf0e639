"""The package layout the design promises: public surfaces, and imports that point down only."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# server -> viewer -> scorers -> traces; nothing imports server but entry points.
FORBIDDEN = {
    "traces": {"scorers", "viewer", "server", "litestar"},
    "scorers": {"viewer", "server", "litestar"},
    "viewer": {"server"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down_only(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("package", ["traces", "scorers", "viewer", "server"])
def test_public_surface_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    assert names, f"{package}/__init__.py must name its public surface in __all__"
    for name in names:
        assert getattr(module, name) is not None, f"{package}.{name} is in __all__ but missing"
