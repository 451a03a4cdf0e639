"""The package layout the design promises: public surfaces, and imports that point down only."""

from __future__ import annotations

import ast
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


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["tracecard", *parts]) if parts[0] in LAYERS else ".".join(parts)


def _runs_at_import(tree: ast.Module) -> list[ast.stmt]:
    """Top-level statements, without `if TYPE_CHECKING:` blocks (imports there never run)."""
    kept: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            kept.extend(node.orelse)
        else:
            kept.append(node)
    return kept


def _import_edges(path: Path, modules: set[str]) -> set[str]:
    """The tracecard modules `path` imports while it is being imported."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runs_at_import(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return {m for m in found if m in modules and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph() -> dict[str, set[str]]:
    """tracecard's modules and the modules each imports at import time."""
    files = [p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")]
    files += list((ROOT / "tracecard").glob("*.py"))
    modules = {_module_name(p): p for p in files if "migrations" not in p.parts}
    return {name: _import_edges(path, set(modules)) for name, path in modules.items()}


def test_the_import_graph_has_no_cycles() -> None:
    """No module imports (directly or through others) a module that imports it back: every
    module can be read, imported and tested from its own dependencies up."""
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the graph was read
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
