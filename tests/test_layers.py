"""The package layout the design promises: public surfaces, and imports that point down only."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# server -> viewer -> scorers -> traces; nothing imports server but entry points.
FORBIDDEN = {
    "traces": {"tracecard.scorers", "tracecard.viewer", "tracecard.server", "litestar"},
    "scorers": {"tracecard.viewer", "tracecard.server", "litestar"},
    "viewer": {"tracecard.server"},
}
LAYERS = ("server", "viewer", "scorers", "traces")


def _root_name(module: str) -> str:
    """`tracecard.server.proxy` -> `tracecard.server`; `litestar.types` -> `litestar`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "tracecard" and len(parts) > 1 else parts[0]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_root_name(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(_root_name(node.module))
    return found


def _python_files() -> list[Path]:
    folders = [*LAYERS, "tests", "bench", "examples"]
    files = [p for folder in folders for p in (ROOT / folder).rglob("*.py")]
    return [*files, *(ROOT / "tracecard").glob("*.py")]


def test_every_import_goes_through_the_tracecard_namespace() -> None:
    """A bare `import server` would load a second copy of a module (and, installed, would not
    exist): every import of the layers spells `tracecard.<layer>`."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & set(LAYERS))
        for path in _python_files()
    }
    assert {k: v for k, v in offenders.items() if v} == {}


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
    module = importlib.import_module(f"tracecard.{package}")
    names = getattr(module, "__all__", None)
    assert names, f"{package}/__init__.py must name its public surface in __all__"
    for name in names:
        assert getattr(module, name) is not None, f"{package}.{name} is in __all__ but missing"
