"""The package layout the design promises: public surfaces, and imports that point down only."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
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


def test_importing_the_scorers_loads_no_storage_sdk_or_codec() -> None:
    """The pure layer stays light: `traces/__init__` is lazy, so the scorers' use of
    `tracecard.traces.semconv` pulls in no SQLAlchemy, SQLModel, OTel SDK or protobuf."""
    heavy = ("sqlalchemy", "sqlmodel", "opentelemetry.sdk", "opentelemetry.proto", "google")
    code = (
        "import sys, tracecard.scorers\n"
        f"heavy = {heavy!r}\n"
        "print(sorted({m for m in sys.modules for h in heavy if m == h or m.startswith(h + '.')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]", done.stdout
    # The lazy surface still answers.
    from tracecard import traces

    assert traces.Store.__name__ == "Store"


def test_server_imports_the_viewer_only_to_mount_it() -> None:
    offenders = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "server").rglob("*.py")
        if "tracecard.viewer" in _imports(path) and path != ROOT / "server" / "app.py"
    )
    assert offenders == []
